package mailboxtest

import (
	"context"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

func (s *Store) pendingLocked(id int64) bool {
	return slices.ContainsFunc(s.events, func(e event) bool { return e.MailboxID == id && !e.processed })
}

// LeaseEvents implements mailbox.RunQueue.
func (s *Store) LeaseEvents(_ context.Context, owner string, ttl time.Duration, runStates []string) (*mailbox.Mailbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var due *mailbox.Mailbox
	for _, m := range s.mailboxes {
		if !free(m, now) {
			continue
		}
		woken := m.ClosedAt == nil && m.WakeAt != nil && !m.WakeAt.After(now) && !slices.Contains(runStates, string(m.State))
		if (woken || s.pendingLocked(m.ID)) && (due == nil || m.UpdatedAt.Before(due.UpdatedAt)) {
			due = m
		}
	}
	if due == nil {
		return nil, nil
	}
	s.claim(due, owner, now.Add(ttl))
	return clone(due), nil
}

// queuedLocked returns the run-state mailboxes that are due and free, in LeaseRun's order.
func (s *Store) queuedLocked(now time.Time, runStates []string, pendingToo bool) []*mailbox.Mailbox {
	var out []*mailbox.Mailbox
	for _, m := range s.mailboxes {
		if !free(m, now) || !slices.Contains(runStates, string(m.State)) {
			continue
		}
		woken := m.WakeAt != nil && !m.WakeAt.After(now)
		if woken || (pendingToo && s.pendingLocked(m.ID)) {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b *mailbox.Mailbox) int {
		switch {
		case a.WakeAt == nil && b.WakeAt == nil:
			return int(a.ID - b.ID)
		case a.WakeAt == nil:
			return 1
		case b.WakeAt == nil:
			return -1
		}
		if c := a.WakeAt.Compare(*b.WakeAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return out
}

// LeaseRun implements mailbox.RunQueue.
func (s *Store) LeaseRun(_ context.Context, owner string, ttl time.Duration, runStates []string, perProject int) (*mailbox.Mailbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, m := range s.queuedLocked(now, runStates, true) {
		if perProject > 0 {
			held := 0
			for _, o := range s.mailboxes {
				if o.ID != m.ID && o.Forge == m.Forge && o.Repo == m.Repo && slices.Contains(runStates, string(o.State)) &&
					o.LeaseOwner != nil && o.LeaseExpires.After(now) {
					held++
				}
			}
			if held >= perProject {
				continue
			}
		}
		s.claim(m, owner, now.Add(ttl))
		return clone(m), nil
	}
	return nil, nil
}

// QueuedRuns implements mailbox.RunQueue.
func (s *Store) QueuedRuns(_ context.Context, runStates []string) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for _, m := range s.queuedLocked(s.now(), runStates, false) {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
