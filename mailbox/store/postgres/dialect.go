package postgres

import (
	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// Dialect is PostgreSQL's: claiming a due mailbox locks the candidate row with FOR UPDATE
// SKIP LOCKED, so concurrent workers of one process or of several `alfred serve` replicas
// each get a different mailbox without waiting on each other.
var Dialect = sqlstore.Dialect{Name: migrations.Postgres, LeaseLock: "FOR UPDATE SKIP LOCKED"}
