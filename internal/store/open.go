// Package store opens the store a database_url names: empty (the default) is the embedded
// SQLite database <data_dir>/alfred.db, for one `alfred serve` process; a postgres:// or
// postgresql:// URL, or a key=value DSN, is PostgreSQL, which several replicas can share;
// sqlite:PATH is a SQLite database at PATH (relative to data_dir).
package store

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// DefaultFile is the SQLite database file in data_dir when database_url is empty.
const DefaultFile = "alfred.db"

// sqlitePrefix introduces an explicit SQLite path in a database_url.
const sqlitePrefix = "sqlite:"

// Engine returns the engine databaseURL selects and, for SQLite, the database file (relative
// paths are taken in dataDir).
func Engine(databaseURL, dataDir string) (d migrations.Dialect, path string) {
	switch {
	case databaseURL == "":
		return migrations.SQLite, filepath.Join(dataDir, DefaultFile)
	case strings.HasPrefix(databaseURL, sqlitePrefix):
		path = strings.TrimPrefix(strings.TrimPrefix(databaseURL, sqlitePrefix), "//")
		if !filepath.IsAbs(path) {
			path = filepath.Join(dataDir, path)
		}
		return migrations.SQLite, path
	default:
		return migrations.Postgres, ""
	}
}

// Open opens the store databaseURL selects (see Engine), applies its migrations and returns
// it; closing the store closes the database. A SQLite database held by another process is an
// error wrapping sqlite.ErrLocked. pool sizes a PostgreSQL connection pool (SQLite has one
// writer connection). now is the store's clock; nil means time.Now.
func Open(ctx context.Context, databaseURL, dataDir string, pool postgres.Pool, now func() time.Time) (*sqlstore.Store, error) {
	d, path := Engine(databaseURL, dataDir)
	if d == migrations.SQLite {
		return sqlite.Open(ctx, path, now)
	}
	return postgres.Open(ctx, databaseURL, pool, now)
}
