// Package migrations holds Alfred's PostgreSQL schema as numbered SQL files, embedded in the
// binary and applied with pressly/goose. `alfred migrate` and `alfred serve` both call Apply.
//
// Migrations are never edited once applied: a change is a new numbered file. Concurrent
// replicas are serialised by a PostgreSQL session advisory lock (goose's
// lock.NewPostgresSessionLocker), the one PostgreSQL-only construct of this package.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Apply brings the database schema to the newest version. It is safe to call from several
// processes at once. It returns the first failing migration's error, wrapped.
func Apply(ctx context.Context, db *sql.DB) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Version returns the current schema version (0 for an empty database).
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := provider(db)
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("create migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(locker), goose.WithTableName("alfred_schema_version"))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}
