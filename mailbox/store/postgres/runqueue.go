package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/alfred-bot/alfred/mailbox"
)

// LeaseEvents implements mailbox.RunQueue (the claim is sqlLeaseEvents, in dialect.go).
func (s *Store) LeaseEvents(ctx context.Context, owner string, ttl time.Duration, runStates []string) (*mailbox.Mailbox, error) {
	now := s.now()
	return s.leaseBy(ctx, sqlLeaseEvents, owner, now.Add(ttl), now, pq.Array(runStates))
}

// LeaseRun implements mailbox.RunQueue (the claim is sqlLeaseRun, in dialect.go).
func (s *Store) LeaseRun(ctx context.Context, owner string, ttl time.Duration, runStates []string, perProject int) (*mailbox.Mailbox, error) {
	now := s.now()
	return s.leaseBy(ctx, sqlLeaseRun, owner, now.Add(ttl), now, pq.Array(runStates), perProject)
}

func (s *Store) leaseBy(ctx context.Context, query string, args ...any) (*mailbox.Mailbox, error) {
	var id int64
	err := s.db.GetContext(ctx, &id, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease mailbox: %w", err)
	}
	return s.Get(ctx, id)
}

// QueuedRuns implements mailbox.RunQueue.
func (s *Store) QueuedRuns(ctx context.Context, runStates []string) ([]int64, error) {
	var ids []int64
	if err := s.db.SelectContext(ctx, &ids, sqlQueuedRuns, s.now(), pq.Array(runStates)); err != nil {
		return nil, fmt.Errorf("list queued runs: %w", err)
	}
	return ids, nil
}
