package mailboxtest

import (
	"context"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

// free reports whether m's lease is free or expired at now.
func free(m *mailbox.Mailbox, now time.Time) bool {
	return m.LeaseExpires == nil || m.LeaseExpires.Before(now)
}

func (s *Store) hold(m *mailbox.Mailbox, owner string, until time.Time) {
	m.LeaseOwner, m.LeaseExpires = &owner, &until
}

// claim holds m for owner and counts the claim (mailbox.Mailbox.LeaseAttempts).
func (s *Store) claim(m *mailbox.Mailbox, owner string, until time.Time) {
	s.hold(m, owner, until)
	m.LeaseAttempts++
}

// Lease implements mailbox.Leases: LeaseEvents with no run states.
func (s *Store) Lease(ctx context.Context, owner string, ttl time.Duration) (*mailbox.Mailbox, error) {
	return s.LeaseEvents(ctx, owner, ttl, nil)
}

// Claim implements mailbox.Leases.
func (s *Store) Claim(_ context.Context, id int64, owner string, ttl time.Duration) (*mailbox.Mailbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.mailbox(id)
	if err != nil {
		return nil, nil
	}
	now := s.now()
	if m.LeaseOwner != nil && !free(m, now) { // a backoff (no owner) holds nothing
		return nil, nil
	}
	s.claim(m, owner, now.Add(ttl))
	return clone(m), nil
}

// Extend implements mailbox.Leases.
func (s *Store) Extend(_ context.Context, id int64, owner string, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.mailbox(id)
	now := s.now()
	if err != nil || m.LeaseOwner == nil || *m.LeaseOwner != owner || !m.LeaseExpires.After(now) {
		return mailbox.ErrLeaseLost
	}
	s.hold(m, owner, now.Add(ttl))
	return nil
}

// Release implements mailbox.Leases.
func (s *Store) Release(_ context.Context, id int64, owner string, backoff time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.mailbox(id)
	if err != nil || m.LeaseOwner == nil || *m.LeaseOwner != owner {
		return nil
	}
	m.LeaseOwner, m.LeaseExpires, m.LeaseAttempts = nil, nil, 0
	if backoff > 0 {
		t := s.now().Add(backoff)
		m.LeaseExpires = &t
	}
	return nil
}

// ExpiredLeases implements mailbox.Leases.
func (s *Store) ExpiredLeases(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	n := 0
	for _, m := range s.mailboxes {
		if m.LeaseOwner != nil && m.LeaseExpires.Before(now) {
			n++
		}
	}
	return n, nil
}

// UnfinishedMailboxes implements mailbox.Leases: live containers are those set with
// SetLiveContainer.
func (s *Store) UnfinishedMailboxes(context.Context) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for _, m := range s.mailboxes {
		running := slices.ContainsFunc(s.runs, func(r mailbox.Run) bool {
			return r.MailboxID == m.ID && r.Status == mailbox.RunRunning
		})
		if running || s.live[m.ID] {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}
