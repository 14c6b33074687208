package postgres

import (
	"errors"

	"github.com/lib/pq"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// Dialect is PostgreSQL's: claiming a due mailbox locks the candidate row with FOR UPDATE
// SKIP LOCKED (of the mailbox row only: OF m), so concurrent workers of one process or of
// several `alfred serve` replicas each get a different mailbox without waiting on each other;
// the due timers are bounded by a sub-select, so the prepared claim keeps one generic plan. A
// value is refused by a data
// exception (SQLSTATE class 22, e.g. a NUL byte in text) or a program limit (class 54); a
// foreign key violation is 23503.
var Dialect = sqlstore.Dialect{
	Name:      migrations.Postgres,
	LeaseLock: "FOR UPDATE OF m SKIP LOCKED",
	// One run claim at a time under runs_per_project, across replicas (the key is Alfred's own).
	RunClaimLock:   "SELECT pg_advisory_xact_lock(7212026001)",
	WakeBound:      "(SELECT $3::timestamptz)",
	DeliverToIssue: sqlDeliverToIssue,
	SaveProcessed:  sqlSaveProcessed,
	InsertEvents:   insertEvents,
	// One statement in flight: deliveries that come while it runs wait and go into the next,
	// so at 8 senders a statement carries about 3.5 of them and the database does half the
	// work per delivery. On a 2-core machine the ingest alone reached 0.49–0.52 × pgbench with
	// one against 0.36 with four idle, and 0.53–0.54 against 0.40–0.46 beside a CPU hog; with
	// other PostgreSQL writes beside it, one and four tie (docs/figures.md). Every delivery
	// waits behind that one statement, so a statement held up (a row lock on its mailbox, a
	// failed group inserted again one delivery at a time) holds up the ingest meanwhile; only
	// the short lease claims lock mailbox rows. One statement at a time also keeps a comment
	// recorded on arrival from ever following an event of its mailbox that waits (a second
	// statement in flight would not see the first's uncommitted rows).
	InsertFlushers: 1,
	BadValue: func(err error) bool {
		var e *pq.Error
		if !errors.As(err, &e) {
			return false
		}
		c := e.Code.Class()
		return c == "22" || c == "54"
	},
	ForeignKeyViolation: func(err error) bool {
		var e *pq.Error
		return errors.As(err, &e) && e.Code == "23503"
	},
}

// sqlSaveProcessed saves a mailbox and marks its events processed in one statement
// (sqlstore.Dialect.SaveProcessed): the save is sqlstore.SaveMailboxSQL, the marks are made
// only when it matched, and the two data-modifying parts commit together (PostgreSQL runs a
// data-modifying WITH part to completion whether or not the query reads it). The trigger that
// records a state change (migrations/0018_state_changes.sql) fires for the save as for any
// other.
const sqlSaveProcessed = `
WITH saved AS (` + sqlstore.SaveMailboxSQL + `
	RETURNING id
), marked AS (
	UPDATE events SET processed_at = $14, outcome = $16
	WHERE id = ANY ($17::bigint[]) AND EXISTS (SELECT 1 FROM saved)
)
SELECT count(*) FROM saved`

// sqlDeliverToIssue stores an event in the mailbox of (forge, repo, number, merge_request),
// creating the mailbox when it does not exist, in one statement. The mailbox row is not locked
// when it exists. It inserts nothing when the delivery was stored before, and also when another
// delivery created the mailbox concurrently (its row is not visible to this statement's
// snapshot); Deliver tells the two apart.
const sqlDeliverToIssue = `
WITH existing AS (
	SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4
), created AS (
	INSERT INTO mailboxes (forge, repo, number, merge_request, created_at, updated_at)
	SELECT $1, $2, $3, $4, $10, $10 WHERE NOT EXISTS (SELECT 1 FROM existing)
	ON CONFLICT (forge, repo, number, merge_request) DO NOTHING
	RETURNING id
)
INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at)
SELECT id, $1, $5, $6, $7, $8, $9 FROM (SELECT id FROM existing UNION ALL SELECT id FROM created) mb
ON CONFLICT DO NOTHING`

// insertEvents is sqlstore.Dialect.InsertEvents: sqlstore.InsertEventsFrom with the parameters
// cast (the first row's to the columns' types, which types the rest), returning the inserted
// events, each with whether it was recorded processed on arrival and whether its delivery id
// was stored before with another body (the (forge, delivery_id, body_hash) unique index, in the
// statement's snapshot, taken before the insert).
func insertEvents(rows int) string {
	with, insert := sqlstore.InsertEventsFrom(rows, eventCasts)
	return `WITH ` + with + `, inserted AS (
` + insert + `
	RETURNING forge, delivery_id, body_hash, processed_at IS NOT NULL AS done
)
SELECT forge, delivery_id, body_hash, done, EXISTS (
	SELECT 1 FROM events e WHERE e.forge = i.forge AND e.delivery_id = i.delivery_id AND e.body_hash <> i.body_hash
) AS others FROM inserted i`
}

// eventCasts are the types of InsertEvents' parameters: the first row's (the rest take them),
// then the clock's and the outcome's.
var eventCasts = []string{"::bigint", "::text", "::text", "::text", "::text", "::text", "::timestamptz", "::boolean",
	"::timestamptz", "::text"}
