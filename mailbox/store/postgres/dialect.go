package postgres

import (
	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// Dialect is PostgreSQL's: claiming a due mailbox locks the candidate row with FOR UPDATE
// SKIP LOCKED (of the mailbox row only: OF m), so concurrent workers of one process or of
// several `alfred serve` replicas each get a different mailbox without waiting on each other;
// the due timers are bounded by a sub-select, so the prepared claim keeps one generic plan.
var Dialect = sqlstore.Dialect{Name: migrations.Postgres, LeaseLock: "FOR UPDATE OF m SKIP LOCKED",
	WakeBound: "(SELECT $3::timestamptz)"}
