package mailboxtest

import (
	"context"

	"github.com/alfred-bot/alfred/mailbox"
)

var _ mailbox.Rebuilds = (*Store)(nil)

// Empty implements mailbox.Rebuilds.
func (s *Store) Empty(context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mailboxes) == 0, nil
}

// Rebuild implements mailbox.Rebuilds.
func (s *Store) Rebuild(_ context.Context, r *mailbox.Rebuilt) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := &r.Mailbox
	for _, m := range s.mailboxes {
		if m.Forge == mb.Forge && m.Repo == mb.Repo && m.Number == mb.Number && !m.MergeRequest {
			return false, nil
		}
	}
	now := s.now()
	next := clone(mb)
	next.ID, next.MergeRequest = int64(len(s.mailboxes)+1), false
	next.LeaseOwner, next.LeaseExpires, next.LeaseAttempts = nil, nil, 0
	next.CreatedAt, next.UpdatedAt, next.ReconciledAt = now, now, nil
	if next.Labels == nil {
		next.Labels = mailbox.StringList{}
	}
	if next.Assignees == nil {
		next.Assignees = mailbox.StringList{}
	}
	s.mailboxes = append(s.mailboxes, next)
	mb.ID = next.ID
	for i := range r.Comments {
		c := &r.Comments[i]
		c.MailboxID = mb.ID
		s.comments[commentKey{c.MailboxID, c.Key}] = *c
	}
	for i := range r.Questions {
		q := &r.Questions[i]
		q.MailboxID = mb.ID
		q.ID = int64(len(s.questions) + 1)
		q.Answer, q.AnsweredBy, q.AnsweredAt = nil, nil, nil
		s.questions = append(s.questions, *q)
	}
	return true, nil
}
