package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

// sqlLeaseEvents claims the least recently updated due mailbox — one with pending events, or
// an open one whose wake_at has come and whose state is not a run state — whose lease is free
// or expired, counts the claim and returns the claimed mailbox (mailboxColumns): $1 owner, $2
// expiry, $3 now. The candidates come from two partial indexes, mailboxes_due_wake (open
// mailboxes with a timer) and events_pending, so the claim reads the due mailboxes and never
// the closed or idle ones, however many there are; each candidate says which index it came
// from, so that picking it costs no look-up of its events. Of them, the %[4]v least recently
// updated are picked first without a lock (a top-N sort, which keeps only N rows, instead of
// sorting every due mailbox to lock them in order), and the first of those whose row is not locked
// by another claim or save is locked, its conditions checked again on the locked row (so
// a concurrent claim or release is seen). A paused mailbox or project is skipped
// (sqlNotPaused). %[1]s is the dialect's WakeBound (how the index scan is bounded by $3),
// %[2]s its LeaseLock, %[3]s the run states as a quoted list.
const sqlLeaseEvents = `
WITH candidate AS (
	SELECT id, FALSE AS pending FROM mailboxes WHERE closed_at IS NULL AND wake_at IS NOT NULL AND wake_at <= %[1]s
	UNION
	SELECT mailbox_id, TRUE FROM events WHERE processed_at IS NULL
), picked AS (
	SELECT m.id FROM mailboxes m JOIN candidate c ON c.id = m.id
	WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $3)
	  AND ` + sqlNotPaused + `
	  AND (c.pending OR m.state NOT IN (%[3]s))
	ORDER BY m.updated_at
	LIMIT %[4]v
), due AS (
	SELECT m.id AS due_id FROM mailboxes m
	WHERE m.id IN (SELECT id FROM picked) AND ` + sqlLeaseDue + `
	ORDER BY m.updated_at
	LIMIT 1
	%[2]s
)
UPDATE mailboxes SET lease_owner = $1, lease_expires_at = $2, lease_attempts = mailboxes.lease_attempts + 1
FROM due WHERE mailboxes.id = due.due_id
RETURNING ` + mailboxColumns

// sqlLeaseDue is the condition a mailbox m meets to be claimed by sqlLeaseEvents: its lease
// free or expired, not paused, and due (an open one whose timer has come outside a run state,
// %[3]s, or one with a pending event).
const sqlLeaseDue = `(m.lease_expires_at IS NULL OR m.lease_expires_at < $3)
	  AND ` + sqlNotPaused + `
	  AND ((m.closed_at IS NULL AND m.wake_at <= $3 AND m.state NOT IN (%[3]s))
	       OR EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL))`

// leasePick is how many due mailboxes sqlLeaseEvents picks before locking one: more than the
// claims that run at once in one process (its event workers), so that the first claim finds
// an unlocked row among them; when every one is locked (other replicas claiming at the same
// time), LeaseEvents claims again from every due mailbox.
const leasePick = 32

// sqlLeaseRun claims the due mailbox in a run state (%[2]s, a quoted list) that waited
// longest, skipping repositories with $4 (> 0) run-state mailboxes under a live lease: $1
// owner, $2 expiry, $3 now. %[1]s is the dialect's LeaseLock. Both the candidates and the
// count of a repository's live runs come from the index mailboxes_state (state, forge, repo),
// so the claim reads the mailboxes in a run state and never the closed ones ('done',
// 'cancelled'), however many there are. A paused mailbox or project is skipped (sqlNotPaused).
const sqlLeaseRun = `
WITH due AS (
	SELECT m.id FROM mailboxes m
	WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $3)
	  AND m.state IN (%[2]s)
	  AND ` + sqlNotPaused + `
	  AND (m.wake_at <= $3 OR EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL))
	  AND ($4 <= 0 OR (SELECT count(*) FROM mailboxes o
	                   WHERE o.forge = m.forge AND o.repo = m.repo AND o.id <> m.id
	                     AND o.state IN (%[2]s) AND o.lease_owner IS NOT NULL AND o.lease_expires_at > $3) < $4)
	ORDER BY m.wake_at NULLS LAST, m.id
	LIMIT 1
	%[1]s
)
UPDATE mailboxes SET lease_owner = $1, lease_expires_at = $2, lease_attempts = mailboxes.lease_attempts + 1
FROM due WHERE mailboxes.id = due.id
RETURNING mailboxes.id`

// sqlQueuedRuns lists the run-state mailboxes (%s) waiting for a run worker, in LeaseRun's
// order: $1 now. It reads the run-state mailboxes only (mailboxes_state).
const sqlQueuedRuns = `
SELECT m.id FROM mailboxes m
WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $1)
  AND m.state IN (%s) AND m.wake_at <= $1
  AND ` + sqlNotPaused + `
ORDER BY m.wake_at, m.id`

// stateList renders states as a quoted SQL list. The states are the mailbox package's own
// constants (mailbox.RunStates), never input; an empty list is (”) , which no state equals.
func stateList(states []string) string {
	if len(states) == 0 {
		return "''"
	}
	q := make([]string, len(states))
	for i, st := range states {
		q[i] = "'" + strings.ReplaceAll(st, "'", "''") + "'"
	}
	return strings.Join(q, ", ")
}

// Lease implements mailbox.Leases: LeaseEvents with no run states.
func (s *Store) Lease(ctx context.Context, owner string, ttl time.Duration) (*mailbox.Mailbox, error) {
	return s.LeaseEvents(ctx, owner, ttl, nil)
}

// LeaseEvents implements mailbox.RunQueue (sqlLeaseEvents): one statement claims and reads
// the mailbox. Workers call it every poll interval, so the statement is prepared once per
// run-state list and kept. When the leasePick mailboxes it picked were all locked by other
// claims (a dialect with a LeaseLock only: without one no row is skipped), it claims again
// from every due mailbox.
func (s *Store) LeaseEvents(ctx context.Context, owner string, ttl time.Duration, runStates []string) (*mailbox.Mailbox, error) {
	now := s.now()
	bound, states := cmp.Or(s.dialect.WakeBound, "$3"), stateList(runStates)
	mb, err := s.claimMailbox(ctx, fmt.Sprintf(sqlLeaseEvents, bound, s.dialect.LeaseLock, states, leasePick), owner, now.Add(ttl), now)
	if err != nil || mb != nil || s.dialect.LeaseLock == "" {
		return mb, err
	}
	return s.claimMailbox(ctx, fmt.Sprintf(sqlLeaseEvents, bound, s.dialect.LeaseLock, states, "ALL"), owner, now.Add(ttl), now)
}

// claimMailbox runs a claim returning mailboxColumns (prepared once and kept) and returns the
// claimed mailbox, nil when none is due.
func (s *Store) claimMailbox(ctx context.Context, query string, args ...any) (*mailbox.Mailbox, error) {
	var m mailbox.Mailbox
	err := s.getPrepared(ctx, &m, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease mailbox: %w", err)
	}
	return &m, nil
}

// LeaseRun implements mailbox.RunQueue (sqlLeaseRun). Under runs_per_project, with a
// dialect's RunClaimLock, the claim runs in a transaction after the lock: a concurrent claim
// waits, then counts this one's lease.
func (s *Store) LeaseRun(ctx context.Context, owner string, ttl time.Duration, runStates []string, perProject int) (*mailbox.Mailbox, error) {
	lock := strings.ReplaceAll(s.dialect.LeaseLock, " OF m", "")
	query := fmt.Sprintf(sqlLeaseRun, lock, stateList(runStates))
	if perProject <= 0 || s.dialect.RunClaimLock == "" {
		now := s.now()
		return s.leaseBy(ctx, query, owner, now.Add(ttl), now, perProject)
	}
	var id int64
	err := s.withTx(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, s.dialect.RunClaimLock); err != nil {
			return err
		}
		now := s.now() // after the wait for the lock
		return q.GetContext(ctx, &id, query, owner, now.Add(ttl), now, perProject)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease mailbox: %w", err)
	}
	return s.Get(ctx, id)
}

// leaseBy runs a claim (prepared once and kept) and returns the claimed mailbox, nil when none
// is due.
func (s *Store) leaseBy(ctx context.Context, query string, args ...any) (*mailbox.Mailbox, error) {
	var id int64
	var err error
	if stmt := s.prepared(ctx, query); stmt != nil {
		err = stmt.QueryRowContext(ctx, args...).Scan(&id)
	} else {
		err = s.db.GetContext(ctx, &id, query, args...)
	}
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
	if err := s.selectPrepared(ctx, &ids, fmt.Sprintf(sqlQueuedRuns, stateList(runStates)), s.now()); err != nil {
		return nil, fmt.Errorf("list queued runs: %w", err)
	}
	return ids, nil
}

const sqlClaim = `
UPDATE mailboxes SET lease_owner = $2, lease_expires_at = $3, lease_attempts = lease_attempts + 1
WHERE id = $1 AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < $4)
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

// sqlExpiredLeases counts the held leases that expired, from the index of held leases
// (mailboxes_leased).
const sqlExpiredLeases = `SELECT count(*) FROM mailboxes
WHERE lease_owner IS NOT NULL AND lease_expires_at < $1`

// ExpiredLeases implements mailbox.Leases.
func (s *Store) ExpiredLeases(ctx context.Context) (int, error) {
	var n int
	if err := s.getPrepared(ctx, &n, sqlExpiredLeases, s.now()); err != nil {
		return 0, fmt.Errorf("count expired leases: %w", err)
	}
	return n, nil
}

// sqlUnfinishedMailboxes reads the live container records (executors_live) and the running
// runs (runs_running), not every run.
const sqlUnfinishedMailboxes = `
SELECT mailbox_id FROM executors WHERE status IN ('starting', 'ready')
UNION SELECT mailbox_id FROM runs WHERE status = 'running' ORDER BY 1`

// UnfinishedMailboxes implements mailbox.Leases: a live container is a container record (executors row)
// in status starting or ready.
func (s *Store) UnfinishedMailboxes(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := s.selectPrepared(ctx, &ids, sqlUnfinishedMailboxes); err != nil {
		return nil, fmt.Errorf("list unfinished mailboxes: %w", err)
	}
	return ids, nil
}
