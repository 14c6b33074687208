// Package sqlite is Alfred's embedded store: the shared SQL store (internal/store/sqlstore) with
// SQLite's Dialect on one database file, for a single `alfred serve` process (several workers
// of that process share it). Several replicas need the PostgreSQL store, which coordinates
// them with row locks.
//
// The database is opened with the pure-Go driver modernc.org/sqlite (the binary stays static)
// in WAL mode, with a busy timeout, foreign keys on, and one connection: SQLite has a single
// writer, and one pooled connection makes the process queue its statements in Go instead of
// retrying on SQLITE_BUSY. Timestamps are stored as INTEGER microseconds since the Unix epoch,
// UTC (see package migrations).
//
// OpenDB holds an exclusive flock(2) on "<database>.lock" for as long as the database is open,
// so a second process opening the same file is refused with an error that says to use
// PostgreSQL; the kernel drops the lock when the process ends, however it ends.
package sqlite

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite" // SQLite driver, registered as "sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// ErrLocked is returned (wrapped) by Open and OpenDB when another process holds the database.
var ErrLocked = errors.New("sqlite: the database is in use by another process")

// ErrNoDatabase is wrapped by OpenExisting when there is no database file at the path.
var ErrNoDatabase = errors.New("sqlite: there is no database file")

// BusyTimeoutMS is how long a statement waits for a lock held by another connection before it
// fails with SQLITE_BUSY, in milliseconds. With one connection per process and the process
// lock it covers tools such as the sqlite3 shell reading the file.
const BusyTimeoutMS = 5000

// DB is an open SQLite database: the connection pool and the process lock. Close releases both.
type DB struct {
	*sqlx.DB
	// Path is the database file.
	Path string
	lock *os.File
}

// Dialect is SQLite's: one writer at a time (one connection, immediate transactions), so the
// lease claim needs no row lock. SQLite stores any text, so a value is refused only when it is
// over its limits (SQLITE_TOOBIG); a foreign key violation is SQLITE_CONSTRAINT_FOREIGNKEY.
var Dialect = sqlstore.Dialect{
	Name:         migrations.SQLite,
	InsertEvents: insertEvents,
	BadValue: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_TOOBIG
	},
	ForeignKeyViolation: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	},
}

// New returns the store on an open database; closing the store closes db.
func New(db *DB, now func() time.Time) *sqlstore.Store { return sqlstore.New(db, Dialect, now) }

// Open opens the database file at path (OpenDB) and returns the store on it.
func Open(ctx context.Context, path string, now func() time.Time) (*sqlstore.Store, error) {
	db, err := OpenDB(ctx, path)
	if err != nil {
		return nil, err
	}
	return New(db, now), nil
}

// OpenExisting is Open for a database that must exist already (alfred doctor): it never
// creates the file or its directory; a missing file is an error wrapping ErrNoDatabase.
func OpenExisting(ctx context.Context, path string, now func() time.Time) (*sqlstore.Store, error) {
	db, err := openDB(ctx, path, false)
	if err != nil {
		return nil, err
	}
	return New(db, now), nil
}

// OpenDB opens (creating it, mode 0600, and its directory when missing) the SQLite database at
// path, takes the process lock on path+".lock" and applies the migrations. A lock held by
// another process returns an error wrapping ErrLocked.
func OpenDB(ctx context.Context, path string) (*DB, error) { return openDB(ctx, path, true) }

// openDB is OpenDB; without create, a missing file is ErrNoDatabase and nothing is created but
// the lock file beside an existing database.
func openDB(ctx context.Context, path string, create bool) (*DB, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open sqlite database: invalid path %q", path)
	}
	if !create {
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("open sqlite database %s: %w", path, ErrNoDatabase)
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create the database directory: %w", err)
	}
	lock, err := acquireLock(path + ".lock")
	if err != nil {
		return nil, err
	}
	if !create {
		if f, err := os.OpenFile(path, os.O_RDWR, 0); err != nil {
			return nil, errors.Join(fmt.Errorf("open sqlite database %s: %w", path, err), lock.Close())
		} else if err := f.Close(); err != nil {
			return nil, errors.Join(err, lock.Close())
		}
	} else if err := createPrivate(path); err != nil {
		return nil, errors.Join(err, lock.Close())
	}
	db, err := sqlx.Open(string(migrations.SQLite), DSN(path))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open sqlite database %s: %w", path, err), lock.Close())
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	d := &DB{DB: db, Path: path, lock: lock}
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open sqlite database %s: %w", path, err), d.Close())
	}
	if err := migrations.Apply(ctx, db.DB, migrations.SQLite); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return d, nil
}

// createPrivate creates the database file readable by its owner only, when it is missing
// (SQLite gives its -wal and -shm files the same mode): it holds every event payload and
// comment.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("create sqlite database %s: %w", path, err)
	}
	return nil
}

// DSN returns the modernc.org/sqlite data source name for the database file at path, with the
// options every connection needs: WAL journal; synchronous FULL (a commit is on disk before
// it returns, so an acknowledged delivery survives a power loss as on PostgreSQL); busy
// timeout; foreign keys; immediate transactions (a transaction takes the write lock when it
// begins, so it never fails half-way on a lock upgrade); and time.Time stored and read as
// INTEGER Unix microseconds.
func DSN(path string) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", fmt.Sprint(BusyTimeoutMS))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	q.Set("_time_integer_format", "unix_micro")
	q.Set("_inttotime", "1")
	return path + "?" + q.Encode()
}

// Close closes the pool, then releases the process lock.
func (d *DB) Close() error {
	err := d.DB.Close()
	if d.lock != nil {
		err = errors.Join(err, d.lock.Close())
		d.lock = nil
	}
	return err
}

// insertEvents is sqlstore.Dialect.InsertEvents: sqlstore.InsertEventsFrom, whose RETURNING
// clause gives the inserted events, each with whether it was recorded processed on arrival and
// whether its delivery id is stored with another body (that look-up sees the rows stored before
// and those of the same statement inserted before it; the MATERIALIZED part is evaluated before
// the insert). A batch is then one write transaction and one sync of the WAL.
func insertEvents(rows int) string {
	with, insert := sqlstore.InsertEventsFrom(rows, nil)
	return `WITH ` + with + `
` + insert + `
RETURNING forge, delivery_id, body_hash, processed_at IS NOT NULL AS done, EXISTS (
	SELECT 1 FROM events e WHERE e.forge = events.forge AND e.delivery_id = events.delivery_id AND e.body_hash <> events.body_hash
) AS others`
}
