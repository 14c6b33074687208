// Package postgres is Alfred's PostgreSQL store (jmoiron/sqlx on lib/pq): the shared SQL store
// (mailbox/store/sqlstore) with PostgreSQL's Dialect, on the schema in migrations/. Several
// `alfred serve` replicas can share one database: leases are claimed with row locks, and the
// migrations are serialised by an advisory lock.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver, registered as "postgres"

	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// New wraps a connection pool whose schema is migrated (migrations.Apply). now is the clock
// every stored time and every lease expiry is read from; nil means time.Now.
func New(db *sqlx.DB, now func() time.Time) *sqlstore.Store { return sqlstore.New(db, Dialect, now) }

// Open connects to the database at url (a postgres:// URL or a key=value DSN), applies the
// migrations and returns the store; closing the store closes the pool.
func Open(ctx context.Context, url string, now func() time.Time) (*sqlstore.Store, error) {
	db, err := sqlx.Open(string(migrations.Postgres), url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect to PostgreSQL (is it running? `make deps` starts it): %w", err), db.Close())
	}
	if err := migrations.Apply(ctx, db.DB, migrations.Postgres); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return New(db, now), nil
}
