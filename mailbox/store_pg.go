package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The PostgreSQL-only statements of the store: claiming a mailbox with FOR UPDATE SKIP LOCKED
// and interval arithmetic with make_interval (lib/pq cannot send a Go duration as an
// interval, so the lease length travels as seconds). A SQLite store will replace this file.

// sqlLease claims the oldest due mailbox: one with pending events or a timer that has come,
// whose lease is free or expired (an expired lease is rescued by being claimed again).
const sqlLease = `
WITH due AS (
	SELECT m.id FROM mailboxes m
	WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < now())
	  AND (m.wake_at <= now()
	       OR EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL))
	ORDER BY m.updated_at
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE mailboxes SET lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2)
FROM due WHERE mailboxes.id = due.id
RETURNING ` + "mailboxes." + `id`

// Lease claims one due mailbox for owner for ttl and returns it, or nil when none is due.
func (s *Store) Lease(ctx context.Context, owner string, ttl time.Duration) (*Mailbox, error) {
	var id int64
	err := s.db.GetContext(ctx, &id, sqlLease, owner, ttl.Seconds())
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease mailbox: %w", err)
	}
	return s.Get(ctx, id)
}

// Extend renews owner's lease on the mailbox for ttl, only while the lease is still owner's and
// unexpired; otherwise ErrLeaseLost.
func (s *Store) Extend(ctx context.Context, id int64, owner string, ttl time.Duration) error {
	res, err := s.db.ExecContext(ctx, `UPDATE mailboxes
		SET lease_expires_at = now() + make_interval(secs => $3)
		WHERE id = $1 AND lease_owner = $2 AND lease_expires_at > now()`, id, owner, ttl.Seconds())
	if err != nil {
		return fmt.Errorf("extend lease: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Release gives the lease back. With backoff > 0 the mailbox is not claimed again before
// backoff has passed (used after a failed attempt, so a failing mailbox does not spin).
func (s *Store) Release(ctx context.Context, id int64, owner string, backoff time.Duration) error {
	_, err := s.db.ExecContext(ctx, `UPDATE mailboxes SET lease_owner = NULL,
		lease_expires_at = CASE WHEN $3 > 0 THEN now() + make_interval(secs => $3) END
		WHERE id = $1 AND lease_owner = $2`, id, owner, backoff.Seconds())
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// ExpiredLeases counts leases whose holder stopped renewing them; they are claimed again by
// Lease. Reported as a metric and in logs at start-up.
func (s *Store) ExpiredLeases(ctx context.Context) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM mailboxes
		WHERE lease_owner IS NOT NULL AND lease_expires_at < now()`)
	if err != nil {
		return 0, fmt.Errorf("count expired leases: %w", err)
	}
	return n, nil
}

// Claim takes the lease of mailbox id for owner for ttl when it is free or expired, and returns
// the mailbox; nil when a live lease holds it. Used by the start-up recovery, which must own a
// mailbox before it touches its runs.
func (s *Store) Claim(ctx context.Context, id int64, owner string, ttl time.Duration) (*Mailbox, error) {
	var got int64
	err := s.db.GetContext(ctx, &got, `UPDATE mailboxes
		SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
		WHERE id = $1 AND (lease_expires_at IS NULL OR lease_expires_at < now())
		RETURNING id`, id, owner, ttl.Seconds())
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim mailbox %d: %w", id, err)
	}
	return s.Get(ctx, id)
}
