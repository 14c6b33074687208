package postgres

// The statements only PostgreSQL runs. Claiming a due mailbox locks the candidate row with
// FOR UPDATE SKIP LOCKED, so concurrent workers (of one process or several) each get a
// different mailbox without waiting on each other. A SQLite store, with one writer at a time,
// runs the same CTE without the locking clause.
//
// The rest of the package's SQL is portable: the upserts use the ON CONFLICT … DO NOTHING / DO
// UPDATE SET … = EXCLUDED.… forms and RETURNING, which SQLite shares; times are parameters,
// never now(); JSON is stored as TEXT and decoded in Go (mailbox.Data, mailbox.StringList).

// sqlLeaseEvents claims the least recently updated due mailbox (pending events, or a wake_at
// that has come) whose lease is free or expired: $1 owner, $2 expiry, $3 now; $4 lists the run
// states, in which only pending events make a mailbox due (empty for Lease).
const sqlLeaseEvents = `
WITH due AS (
	SELECT m.id FROM mailboxes m
	WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $3)
	  AND ((m.wake_at <= $3 AND NOT m.state = ANY($4))
	       OR EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL))
	ORDER BY m.updated_at
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE mailboxes SET lease_owner = $1, lease_expires_at = $2, lease_attempts = mailboxes.lease_attempts + 1
FROM due WHERE mailboxes.id = due.id
RETURNING mailboxes.id`

// sqlLeaseRun claims the due mailbox in a run state ($4) that waited longest, skipping
// repositories with $5 (> 0) run-state mailboxes under a live lease.
const sqlLeaseRun = `
WITH due AS (
	SELECT m.id FROM mailboxes m
	WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $3)
	  AND m.state = ANY($4)
	  AND (m.wake_at <= $3 OR EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL))
	  AND ($5 <= 0 OR (SELECT count(*) FROM mailboxes o
	                   WHERE o.forge = m.forge AND o.repo = m.repo AND o.id <> m.id
	                     AND o.state = ANY($4) AND o.lease_owner IS NOT NULL AND o.lease_expires_at > $3) < $5)
	ORDER BY m.wake_at NULLS LAST, m.id
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE mailboxes SET lease_owner = $1, lease_expires_at = $2, lease_attempts = mailboxes.lease_attempts + 1
FROM due WHERE mailboxes.id = due.id
RETURNING mailboxes.id`

// sqlQueuedRuns lists the run-state mailboxes ($2) waiting for a run worker, in LeaseRun's order.
const sqlQueuedRuns = `
SELECT m.id FROM mailboxes m
WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $1)
  AND m.state = ANY($2) AND m.wake_at <= $1
ORDER BY m.wake_at, m.id`
