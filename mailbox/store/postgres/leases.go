package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

// Lease implements mailbox.Leases: LeaseEvents with no run states.
func (s *Store) Lease(ctx context.Context, owner string, ttl time.Duration) (*mailbox.Mailbox, error) {
	return s.LeaseEvents(ctx, owner, ttl, []string{})
}

const sqlClaim = `
UPDATE mailboxes SET lease_owner = $2, lease_expires_at = $3, lease_attempts = lease_attempts + 1
WHERE id = $1 AND (lease_expires_at IS NULL OR lease_expires_at < $4)
RETURNING id`

// Claim implements mailbox.Leases.
func (s *Store) Claim(ctx context.Context, id int64, owner string, ttl time.Duration) (*mailbox.Mailbox, error) {
	now := s.now()
	var got int64
	err := s.db.GetContext(ctx, &got, sqlClaim, id, owner, now.Add(ttl), now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim mailbox %d: %w", id, err)
	}
	return s.Get(ctx, id)
}

const sqlExtend = `
UPDATE mailboxes SET lease_expires_at = $3
WHERE id = $1 AND lease_owner = $2 AND lease_expires_at > $4`

// Extend implements mailbox.Leases.
func (s *Store) Extend(ctx context.Context, id int64, owner string, ttl time.Duration) error {
	now := s.now()
	res, err := s.db.ExecContext(ctx, sqlExtend, id, owner, now.Add(ttl), now)
	if err != nil {
		return fmt.Errorf("extend lease: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return mailbox.ErrLeaseLost
	}
	return nil
}

// sqlRelease frees the lease; $3 is the end of the backoff, NULL for none.
const sqlRelease = `UPDATE mailboxes SET lease_owner = NULL, lease_expires_at = $3, lease_attempts = 0
WHERE id = $1 AND lease_owner = $2`

// Release implements mailbox.Leases: the backoff is an expired-in-the-future lease without an
// owner, which Lease skips until it passes.
func (s *Store) Release(ctx context.Context, id int64, owner string, backoff time.Duration) error {
	var until *time.Time
	if backoff > 0 {
		t := s.now().Add(backoff)
		until = &t
	}
	if _, err := s.db.ExecContext(ctx, sqlRelease, id, owner, until); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

const sqlExpiredLeases = `SELECT count(*) FROM mailboxes
WHERE lease_owner IS NOT NULL AND lease_expires_at < $1`

// ExpiredLeases implements mailbox.Leases.
func (s *Store) ExpiredLeases(ctx context.Context) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, sqlExpiredLeases, s.now()); err != nil {
		return 0, fmt.Errorf("count expired leases: %w", err)
	}
	return n, nil
}

const sqlUnfinishedMailboxes = `
SELECT mailbox_id FROM executors WHERE status IN ('starting', 'ready')
UNION SELECT mailbox_id FROM runs WHERE status = 'running' ORDER BY 1`

// UnfinishedMailboxes implements mailbox.Leases: a live container is an executor row in
// status starting or ready.
func (s *Store) UnfinishedMailboxes(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.db.SelectContext(ctx, &ids, sqlUnfinishedMailboxes); err != nil {
		return nil, fmt.Errorf("list unfinished mailboxes: %w", err)
	}
	return ids, nil
}
