// Package postgres is the PostgreSQL store of Alfred (jmoiron/sqlx on lib/pq). It implements
// mailbox.Store, the runner's runner.ContainerLog and runner.SessionStore, and the queries of
// the admin endpoints, on the schema in migrations/.
//
// The SQL lives in constants beside the method that runs it and is portable (a SQLite store
// can be a sibling package with the same statements). The statements only PostgreSQL runs are
// in dialect.go. No statement reads the database's clock: every time is passed from Go,
// taken from the one clock the store is built with.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner"
)

var (
	_ mailbox.Store       = (*Store)(nil)
	_ runner.ContainerLog = (*Store)(nil)
	_ runner.SessionStore = (*Store)(nil)
)

// querier is what *sqlx.DB and *sqlx.Tx have in common.
type querier interface {
	sqlx.ExtContext
	GetContext(ctx context.Context, dest any, query string, args ...any) error
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
}

// Store is Alfred's PostgreSQL store.
type Store struct {
	db  *sqlx.DB
	now func() time.Time
	log *slog.Logger
}

// WithLogger makes the store log what it notices on the way (a delivery id that came again
// with another body) to log, and returns the store.
func (s *Store) WithLogger(log *slog.Logger) *Store {
	s.log = log
	return s
}

// New wraps a connection pool whose schema is migrated (migrations.Apply). now is the clock
// every stored time and every lease expiry is read from; nil means time.Now.
func New(db *sqlx.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now, log: slog.New(slog.DiscardHandler)}
}

// DB returns the underlying pool.
func (s *Store) DB() *sqlx.DB { return s.db }

// Ping reports whether the database answers; used by GET /readyz.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// withTx runs fn in a transaction, committed when fn returns nil and rolled back otherwise.
func (s *Store) withTx(ctx context.Context, fn func(q querier) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// idSet selects a list of ids into a set.
func (s *Store) idSet(ctx context.Context, what, query string, args ...any) (map[int64]bool, error) {
	var ids []int64
	if err := s.db.SelectContext(ctx, &ids, query, args...); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
