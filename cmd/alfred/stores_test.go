package main

import (
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/migrations"
)

// The stores an Alfred under test runs on.
const (
	// storeSQLite is the default: an empty database_url, the database file in data_dir.
	storeSQLite = "sqlite"
	// storePostgres is a fresh PostgreSQL schema (internal/base/pgtest).
	storePostgres = "postgres"
)

// e2eStores are the stores the end-to-end lifecycle and crash tests run on, each in a subtest.
var e2eStores = []string{storeSQLite, storePostgres}

// testDatabaseURL returns the database_url of an Alfred under test on kind.
func testDatabaseURL(t testing.TB, kind string) string {
	t.Helper()
	if kind == storePostgres {
		_, dsn := pgtest.New(t)
		return dsn
	}
	return ""
}

// openTestDatabase opens the database of an Alfred under test (database_url, data_dir) for
// the test to read and check. A SQLite database is opened without the process lock, so the
// test reads it while Alfred runs (readers do not block the writer in WAL mode).
func openTestDatabase(t *testing.T, databaseURL, dataDir string) *sqlx.DB {
	t.Helper()
	d, path := store.Engine(databaseURL, dataDir)
	dsn := databaseURL
	if d == migrations.SQLite {
		dsn = sqlite.DSN(path)
	}
	db, err := sqlx.Connect(string(d), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
