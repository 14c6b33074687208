package postgres

import (
	"errors"

	"github.com/lib/pq"

	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// Dialect is PostgreSQL's: claiming a due mailbox locks the candidate row with FOR UPDATE
// SKIP LOCKED, so concurrent workers of one process or of several `alfred serve` replicas
// each get a different mailbox without waiting on each other. A value is refused by a data
// exception (SQLSTATE class 22, e.g. a NUL byte in text) or a program limit (class 54); a
// foreign key violation is 23503.
var Dialect = sqlstore.Dialect{
	Name:      migrations.Postgres,
	LeaseLock: "FOR UPDATE SKIP LOCKED",
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
