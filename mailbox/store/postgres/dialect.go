package postgres

// The statements only PostgreSQL runs. Claiming a due mailbox locks the candidate row with
// FOR UPDATE SKIP LOCKED, so concurrent workers (of one process or several) each get a
// different mailbox without waiting on each other. A SQLite store, with one writer at a time,
// runs the same CTE without the locking clause.
//
// The rest of the package's SQL is portable: the upserts use the ON CONFLICT … DO NOTHING / DO
// UPDATE SET … = EXCLUDED.… forms and RETURNING, which SQLite shares; times are parameters,
// never now(); JSON is stored as TEXT and decoded in Go (mailbox.Data, mailbox.StringList).

// sqlLease claims the least recently updated due mailbox (pending events, or a wake_at that
// has come) whose lease is free or expired: $1 owner, $2 expiry, $3 now.
const sqlLease = `
WITH due AS (
	SELECT m.id FROM mailboxes m
	WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $3)
	  AND (m.wake_at <= $3
	       OR EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL))
	ORDER BY m.updated_at
	LIMIT 1
	FOR UPDATE SKIP LOCKED
)
UPDATE mailboxes SET lease_owner = $1, lease_expires_at = $2, lease_attempts = mailboxes.lease_attempts + 1
FROM due WHERE mailboxes.id = due.id
RETURNING mailboxes.id`
