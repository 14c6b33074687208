// Package sqlstore is Alfred's store on a SQL database, shared by the PostgreSQL store
// (internal/store/postgres) and the embedded SQLite store (internal/store/sqlite). It
// implements mailbox.Store, the runner's runner.ContainerLog and runner.SessionStore, and the
// queries of the admin endpoints, on the schema in migrations/ (one set of files per engine,
// with the same tables and columns).
//
// The SQL lives in constants beside the method that runs it and runs unchanged on both engines
// (jmoiron/sqlx; $n placeholders, which modernc.org/sqlite binds by number too). What differs
// is a Dialect, given by the engine's package: the row lock of the lease claim, the grouped
// insert of events, and how the engine reports a refused value or a foreign key violation. No
// statement reads the database's clock: every time is passed from Go, taken from the one clock
// the store is built with.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/jmoiron/sqlx/reflectx"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/migrations"
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

// DB is the connection pool a Store runs on: a *sqlx.DB, or a wrapper around one that also
// releases what it holds when closed (the SQLite store's process lock).
type DB interface {
	querier
	BeginTxx(ctx context.Context, opts *sql.TxOptions) (*sqlx.Tx, error)
	PingContext(ctx context.Context) error
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	Close() error
}

// Dialect is what the engines do differently.
type Dialect struct {
	// Name is the engine, as migrations names it.
	Name migrations.Dialect
	// LeaseLock is appended to the query that picks the mailbox Lease claims. PostgreSQL locks
	// the candidate row with FOR UPDATE SKIP LOCKED, so concurrent workers, of one process or
	// several, each get a different mailbox without waiting on each other; SQLite has one
	// writer at a time and takes no row locks, so its lock is empty.
	LeaseLock string
	// RunClaimLock is a statement the run claim (LeaseRun) runs first, in a transaction of its
	// own, when runs_per_project bounds it: without it two claims at once each count the
	// repository's live runs in their own snapshot and each skip the row the other locked, so
	// both take a run of the same repository. PostgreSQL takes a transaction-level advisory
	// lock; SQLite, one writer at a time, needs none ("").
	RunClaimLock string
	// WakeBound is the expression the lease claim's index scan of due timers is bounded by: $3
	// (now) when empty. PostgreSQL's is a sub-select, which the planner treats as a run-time
	// value: given $3 itself it would plan every call anew for the value (probing the index for
	// the column's range) instead of keeping the prepared statement's one generic plan.
	WakeBound string
	// InsertEvents returns one statement that inserts rows events into known mailboxes, in the
	// order given (built on InsertEventsFrom), given as 8 parameters per event ($1…$8 for the first:
	// mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, inert) and
	// two after them ($8·rows+1, the store's clock; $8·rows+2, mailbox.OutcomeAtRest),
	// skipping those stored before, and returns a row (forge, delivery_id, body_hash, done,
	// others) per inserted event. An event whose inert is true is recorded processed (done:
	// processed_at the clock, outcome the text) when its mailbox's state is one of
	// mailbox.RestStates, retention has not purged it (purged_at), and no event of its mailbox is
	// pending in the statement's snapshot (mailbox.ArrivalInbox); others tells whether its delivery id was stored before with
	// another body. Concurrent deliveries share a statement and a commit (batch.go). Every
	// engine has one.
	InsertEvents func(rows int) string
	// InsertFlushers is the number of InsertEvents statements in flight at once (batch.go); 0
	// means defaultInsertFlushers. An engine with one writer gains nothing from more than one
	// or two: they would wait for the writer with smaller groups. On PostgreSQL too, one
	// statement in flight makes the groups large enough to cost less than overlapping commits
	// save (docs/figures.md).
	InsertFlushers int
	// DeliverToIssue, when set, is one statement that finds or creates an issue's mailbox and
	// inserts the event into it (arguments: forge, repo, number, merge_request, delivery_id,
	// body_hash, event_type, payload, received_at, now), for the first delivery of a mailbox
	// this process has not stored into; "" takes three portable statements instead.
	DeliverToIssue string
	// SaveProcessed, when set, is one statement that saves a mailbox (the parameters of
	// SaveMailboxSQL, $1…$15, fenced the same way) and marks events processed at its
	// updated_at ($14) with outcome $16: the events whose ids $17 lists as an array literal
	// ("{1,2,3}"), only when the save matched. It returns the rows saved (0 or 1). SaveProcessed
	// uses it for a pass's events of one outcome, so that a mailbox and its events are written in
	// one round trip, without BEGIN and COMMIT of their own; "" takes a transaction of a
	// statement each.
	SaveProcessed string
	// BadValue reports an error by which the engine refused a value it was given (PostgreSQL's
	// data exceptions and program limits, SQLite's "too big"): the input cannot be stored, so
	// the caller answers it as a bad payload rather than as an outage. nil means none.
	BadValue func(error) bool
	// ForeignKeyViolation reports a foreign key violation (the referenced row is gone). nil
	// means none.
	ForeignKeyViolation func(error) bool
}

// Store is Alfred's store on one database.
type Store struct {
	db      DB
	dialect Dialect
	now     func() time.Time
	// ids remembers mailbox ids by key for Deliver (mailboxIDs).
	ids *mailboxIDs
	// insertStmt is sqlInsertEvent, prepared on first use.
	insertStmt onceStmt
	// batch groups concurrent event inserts when the dialect has InsertEvents (batch.go).
	batch *inserter
	// stmts holds the statements prepared once and kept (prepared), by query text: the
	// claims and the statements Alfred issues on its own (sweeps, reconciliation, look-ups).
	stmts sync.Map
	// log receives what the store notices on the way (a delivery id that came again with
	// another body); WithLogger sets it.
	log *slog.Logger
}

// New wraps a connection pool whose schema is migrated (migrations.Apply) for engine d. now is
// the clock every stored time and every lease expiry is read from; nil means time.Now.
func New(db DB, d Dialect, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, dialect: d, now: now, ids: newMailboxIDs(maxCachedMailboxIDs),
		batch: newInserter(), log: slog.New(slog.DiscardHandler)}
}

// WithLogger makes the store log what it notices on the way (a delivery id that came again
// with another body) to log, and returns the store.
func (s *Store) WithLogger(log *slog.Logger) *Store {
	s.log = log
	return s
}

// prepared returns query prepared once and kept by the store (database/sql prepares it again
// on each pooled connection that runs it), or nil when it cannot be prepared (it then runs
// unprepared).
func (s *Store) prepared(ctx context.Context, query string) *sql.Stmt {
	v, _ := s.stmts.LoadOrStore(query, &onceStmt{})
	return v.(*onceStmt).get(ctx, s.db, query)
}

// stmtMapper maps struct fields to columns for the prepared statements as sqlx does by
// default: the db tag, else the lowercased field name.
var stmtMapper = reflectx.NewMapperFunc("db", sqlx.NameMapper)

// getPrepared is GetContext with query prepared once and kept (prepared): PostgreSQL plans it
// once per connection instead of on every call. It runs unprepared when it cannot be prepared.
func (s *Store) getPrepared(ctx context.Context, dest any, query string, args ...any) error {
	if stmt := s.prepared(ctx, query); stmt != nil {
		return (&sqlx.Stmt{Stmt: stmt, Mapper: stmtMapper}).GetContext(ctx, dest, args...)
	}
	return s.db.GetContext(ctx, dest, query, args...)
}

// selectPrepared is SelectContext with query prepared once and kept, as getPrepared.
func (s *Store) selectPrepared(ctx context.Context, dest any, query string, args ...any) error {
	if stmt := s.prepared(ctx, query); stmt != nil {
		return (&sqlx.Stmt{Stmt: stmt, Mapper: stmtMapper}).SelectContext(ctx, dest, args...)
	}
	return s.db.SelectContext(ctx, dest, query, args...)
}

// SchemaVersion returns the newest migration applied to the database (migrations/, goose's
// table alfred_schema_version); 0 when none is.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.db.GetContext(ctx, &v, `SELECT coalesce(max(version_id), 0) FROM alfred_schema_version WHERE is_applied`); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	return v, nil
}

// DB returns the underlying pool.
func (s *Store) DB() DB { return s.db }

// Dialect returns the engine's dialect.
func (s *Store) Dialect() Dialect { return s.dialect }

// Ping reports whether the database answers; used by GET /readyz.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close stops the flushers of grouped inserts (a delivery in flight gets an error) and closes
// the pool (and, on SQLite, releases the process lock).
func (s *Store) Close() error {
	s.batch.close()
	return s.db.Close()
}

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

// onceStmt is a statement prepared on first use and kept by the store (database/sql prepares
// it again on each pooled connection that runs it). When the preparation fails, the statement
// runs unprepared.
type onceStmt struct {
	once sync.Once
	stmt *sql.Stmt
	err  error
}

// get returns the prepared statement, preparing query on the first call, or nil when it could
// not be prepared.
func (o *onceStmt) get(ctx context.Context, db DB, query string) *sql.Stmt {
	o.once.Do(func() { o.stmt, o.err = db.PrepareContext(context.WithoutCancel(ctx), query) })
	if o.err != nil {
		return nil
	}
	return o.stmt
}

// idSet selects a list of ids into a set, with query prepared once and kept.
func (s *Store) idSet(ctx context.Context, what, query string, args ...any) (map[int64]bool, error) {
	var ids []int64
	if err := s.selectPrepared(ctx, &ids, query, args...); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
