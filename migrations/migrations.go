// Package migrations holds Alfred's schema as numbered SQL files, one set per database engine,
// embedded in the binary and applied with pressly/goose. `alfred migrate` and `alfred serve`
// both call Apply.
//
// The PostgreSQL files are at the root of the package; sqlite/ holds their SQLite translations,
// with the same numbers and names (TestDialectsInStep fails when one side lacks a file). The
// translation maps BIGSERIAL to INTEGER PRIMARY KEY AUTOINCREMENT, BIGINT to INTEGER, DOUBLE
// PRECISION to REAL, and TIMESTAMPTZ to a column declared TIMESTAMP that holds INTEGER
// microseconds since the Unix epoch, UTC (the store opens SQLite with the modernc.org/sqlite
// options _time_integer_format=unix_micro and _inttotime=1, so Go's time.Time round-trips and
// comparisons are integer comparisons). BOOLEAN columns hold 0 and 1; JSON documents are TEXT
// on both engines.
//
// Migrations are never edited once applied: a change is a new numbered file on both sides.
// Concurrent PostgreSQL replicas are serialised by a session advisory lock (goose's
// lock.NewPostgresSessionLocker), one per schema: its id is derived from the schema the pool
// writes to (current_schema()), so instances of Alfred in separate schemas of one database
// migrate at once while replicas of one instance take turns, the one waiting polling every
// second for up to five minutes. A SQLite database has a single process (its store holds an
// exclusive lock file), so it needs none.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/binary"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Dialect names a database engine Alfred has a schema for. Its value is also the
// database/sql driver name (lib/pq registers "postgres", modernc.org/sqlite "sqlite").
type Dialect string

// The supported engines.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

//go:embed *.sql sqlite/*.sql
var files embed.FS

// Files returns the migration files of d (numbered NNNN_name.sql at the root of the FS).
func Files(d Dialect) (fs.FS, error) {
	switch d {
	case Postgres:
		return files, nil
	case SQLite:
		return fs.Sub(files, "sqlite")
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", d)
	}
}

// Apply brings the schema of db, a database of engine d, to the newest version. On
// PostgreSQL it is safe to call from several processes at once. It returns the first failing
// migration's error, wrapped.
func Apply(ctx context.Context, db *sql.DB, d Dialect) error {
	p, err := provider(ctx, db, d)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Version returns the current schema version of db (0 for an empty database).
func Version(ctx context.Context, db *sql.DB, d Dialect) (int64, error) {
	p, err := provider(ctx, db, d)
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

func provider(ctx context.Context, db *sql.DB, d Dialect) (*goose.Provider, error) {
	fsys, err := Files(d)
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithTableName("alfred_schema_version")}
	dialect := goose.DialectSQLite3
	if d == Postgres {
		var schema string
		if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return nil, fmt.Errorf("read the schema to migrate: %w", err)
		}
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(schemaLockID(schema)), lock.WithLockTimeout(1, 300))
		if err != nil {
			return nil, fmt.Errorf("create migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
		dialect = goose.DialectPostgres
	}
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s migrations: %w", d, err)
	}
	return p, nil
}

// schemaLockID is the advisory lock id of the migrations of schema: the first 8 bytes of the
// SHA-256 of "alfred-migrations:" and the schema's name.
func schemaLockID(schema string) int64 {
	sum := sha256.Sum256([]byte("alfred-migrations:" + schema))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}
