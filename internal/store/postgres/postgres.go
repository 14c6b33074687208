// Package postgres is Alfred's PostgreSQL store (jmoiron/sqlx on lib/pq): the shared SQL store
// (internal/store/sqlstore) with PostgreSQL's Dialect, on the schema in migrations/. Several
// `alfred serve` replicas can share one database: leases are claimed with row locks, and the
// migrations are serialised by an advisory lock.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver, registered as "postgres"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// New wraps a connection pool whose schema is migrated (migrations.Apply). now is the clock
// every stored time and every lease expiry is read from; nil means time.Now.
func New(db *sqlx.DB, now func() time.Time) *sqlstore.Store { return sqlstore.New(db, Dialect, now) }

// Pool sizes the connection pool of one process (database/sql settings); a zero field takes
// its default. The pool waits for a free connection instead of opening more than MaxOpen, so a
// burst of deliveries queues instead of exhausting PostgreSQL's max_connections (100 by
// default, shared with every other client of the server).
type Pool struct {
	// MaxOpen caps the open connections (default 16).
	MaxOpen int
	// MaxIdle is how many connections stay open while idle (default 16, so a steady load never
	// reconnects).
	MaxIdle int
	// Lifetime closes a connection this old (default 30 minutes); IdleTime one idle this long
	// (default 5 minutes).
	Lifetime, IdleTime time.Duration
}

// Open connects to the database at url (a postgres:// URL or a key=value DSN) with the pool
// sized by pool, applies the migrations and returns the store; closing the store closes the
// pool.
func Open(ctx context.Context, url string, pool Pool, now func() time.Time) (*sqlstore.Store, error) {
	db, err := sqlx.Open(string(migrations.Postgres), url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db.SetMaxOpenConns(cmp.Or(pool.MaxOpen, 16))
	db.SetMaxIdleConns(cmp.Or(pool.MaxIdle, 16))
	db.SetConnMaxLifetime(cmp.Or(pool.Lifetime, 30*time.Minute))
	db.SetConnMaxIdleTime(cmp.Or(pool.IdleTime, 5*time.Minute))
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("connect to PostgreSQL (is it running? `make deps` starts it): %w", err), db.Close())
	}
	if err := migrations.Apply(ctx, db.DB, migrations.Postgres); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return New(db, now), nil
}
