package postgres

// The statements only PostgreSQL runs. Claiming a due mailbox locks the candidate row with
// FOR UPDATE SKIP LOCKED, so concurrent workers (of one process or several) each get a
// different mailbox without waiting on each other. A SQLite store, with one writer at a time,
// runs the same CTE without the locking clause.
//
// The rest of the package's SQL is portable: the upserts use the ON CONFLICT … DO NOTHING / DO
// UPDATE SET … = EXCLUDED.… forms and RETURNING, which SQLite shares; times are parameters,
// never now(); JSON is stored as TEXT and decoded in Go (mailbox.Data, mailbox.StringList).

// sqlLease claims the least recently updated due mailbox — one with pending events, or an open
// one whose wake_at has come — whose lease is free or expired: $1 owner, $2 expiry, $3 now. The
// candidates come from two partial indexes, mailboxes_due_wake (open mailboxes with a timer)
// and events_pending, so the claim reads the due mailboxes and never the closed or idle ones,
// however many there are. The conditions are checked again on the locked row.
//
// The index bound is the sub-select (SELECT $3) rather than $3: with a plain parameter the
// planner, handed the value, keeps a plan per value — planning each call anew and probing the
// index for the column's actual range — while a sub-select is a run-time bound, so the
// prepared statement settles on one generic plan.
const sqlLease = `
WITH candidate AS (
	SELECT id FROM mailboxes WHERE closed_at IS NULL AND wake_at IS NOT NULL AND wake_at <= (SELECT $3::timestamptz)
	UNION
	SELECT mailbox_id FROM events WHERE processed_at IS NULL
), due AS (
	SELECT m.id FROM mailboxes m JOIN candidate c ON c.id = m.id
	WHERE (m.lease_expires_at IS NULL OR m.lease_expires_at < $3)
	  AND ((m.closed_at IS NULL AND m.wake_at <= $3)
	       OR EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL))
	ORDER BY m.updated_at
	LIMIT 1
	FOR UPDATE OF m SKIP LOCKED
)
UPDATE mailboxes SET lease_owner = $1, lease_expires_at = $2
FROM due WHERE mailboxes.id = due.id
RETURNING mailboxes.id`
