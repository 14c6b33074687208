package mailboxtest

import (
	"cmp"
	"context"
	"slices"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// ApplyComment implements mailbox.Reconciliation.
func (s *Store) ApplyComment(_ context.Context, mailboxID, commentID, eventID int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]int64{mailboxID, commentID}
	if owner, ok := s.applied[k]; ok {
		return owner == eventID, nil
	}
	s.applied[k] = eventID
	return true, nil
}

func working(m *mailbox.Mailbox) bool {
	return m.State.Working() && !m.MergeRequest && m.ClosedAt == nil
}

// ReconcileDue implements mailbox.Reconciliation.
func (s *Store) ReconcileDue(_ context.Context, forgeName string, limit int) ([]mailbox.Mailbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mailbox.Mailbox
	for _, m := range s.mailboxes {
		if m.Forge == forgeName && working(m) {
			out = append(out, *clone(m))
		}
	}
	slices.SortStableFunc(out, func(a, b mailbox.Mailbox) int {
		switch {
		case a.ReconciledAt == nil && b.ReconciledAt == nil:
			return cmp.Compare(a.ID, b.ID)
		case a.ReconciledAt == nil:
			return -1
		case b.ReconciledAt == nil:
			return 1
		}
		return cmp.Or(a.ReconciledAt.Compare(*b.ReconciledAt), cmp.Compare(a.ID, b.ID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SaveReconciled implements mailbox.Reconciliation.
func (s *Store) SaveReconciled(_ context.Context, id int64, r mailbox.Reconciled) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.mailbox(id)
	if err != nil {
		return err
	}
	now := s.now()
	r.ReconciledAt = &now
	m.Reconciled = r
	return nil
}

// Tracked implements mailbox.Reconciliation.
func (s *Store) Tracked(_ context.Context, ref forge.IssueRef) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.mailboxes, func(m *mailbox.Mailbox) bool {
		return m.Forge == ref.Forge && m.Repo == ref.Repo && m.Number == ref.Number && working(m)
	}), nil
}

// KnownRepos implements mailbox.Reconciliation.
func (s *Store) KnownRepos(_ context.Context, forgeName string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.mailboxes {
		if m.Forge == forgeName && !slices.Contains(out, m.Repo) {
			out = append(out, m.Repo)
		}
	}
	slices.Sort(out)
	return out, nil
}

// FailEvents implements mailbox.Reconciliation.
func (s *Store) FailEvents(_ context.Context, eventIDs []int64, errText string, max int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range eventIDs {
		if id < 1 || int(id) > len(s.events) || s.events[id-1].processed {
			continue
		}
		e := &s.events[id-1]
		e.attempts++
		e.err = errText
		if e.attempts >= max {
			e.processed, e.failed, e.outcome = true, true, "set aside: could not be applied"
			n++
		}
	}
	return n, nil
}
