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
	for _, mb := range s.mailboxes {
		if mb.State != mailbox.StateIdle {
			return false, nil
		}
	}
	for _, e := range s.events {
		if e.processed {
			return false, nil
		}
	}
	return len(s.comments) == 0, nil
}

// Rebuild implements mailbox.Rebuilds.
func (s *Store) Rebuild(_ context.Context, r *mailbox.Rebuilt) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := &r.Mailbox
	now := s.now()
	next := clone(mb)
	next.ID, next.MergeRequest = int64(len(s.mailboxes)+1), false
	next.CreatedAt = now
	taken := -1 // the index of an idle mailbox of the issue, taken over
	for i, m := range s.mailboxes {
		if m.Forge == mb.Forge && m.Repo == mb.Repo && m.Number == mb.Number && !m.MergeRequest {
			if m.State != mailbox.StateIdle || next.State == mailbox.StateIdle {
				return false, nil // an idle mailbox already says all an idle rebuild would
			}
			if m.LeaseOwner != nil && !free(m, now) {
				return false, nil // a worker holds it: its own now
			}
			taken, next.ID, next.CreatedAt = i, m.ID, m.CreatedAt
		}
	}
	next.LeaseOwner, next.LeaseExpires, next.LeaseAttempts = nil, nil, 0
	next.UpdatedAt, next.ReconciledAt = now, nil
	if next.Labels == nil {
		next.Labels = mailbox.StringList{}
	}
	if next.Assignees == nil {
		next.Assignees = mailbox.StringList{}
	}
	if taken >= 0 {
		s.mailboxes[taken] = next
	} else {
		s.mailboxes = append(s.mailboxes, next)
	}
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
