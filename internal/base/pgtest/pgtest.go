// Package pgtest gives each test its own PostgreSQL schema with Alfred's migrations applied.
//
// The database comes from ALFRED_TEST_DATABASE_URL (the Makefile's `test` target sets
// postgres://alfred:alfred-dev-7Kq2vN9x@127.0.0.1:5432/alfred_test?sslmode=disable, the role
// scripts/dev-deps.sh makes). Without it, a test is skipped loudly outside CI and fails in CI
// (CI set), so a green CI run always used PostgreSQL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver

	"github.com/alfred-bot/alfred/migrations"
)

// URL returns the test database URL, skipping or failing t when none is configured.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("ALFRED_TEST_DATABASE_URL")
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ALFRED_TEST_DATABASE_URL is not set in CI: PostgreSQL tests cannot run")
		}
		t.Skip("SKIPPING: ALFRED_TEST_DATABASE_URL is not set; run `make test` to use PostgreSQL")
	}
	return u
}

// New creates a fresh schema, applies the migrations in it and returns a pool whose
// connections use that schema, plus the DSN for other pools (a second "process"). The
// schema is dropped when the test ends.
func New(t testing.TB) (*sqlx.DB, string) {
	t.Helper()
	base := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])

	admin, err := sqlx.ConnectContext(ctx, "postgres", base)
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = admin.Close()
	})

	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse ALFRED_TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema) // lib/pq sends unknown keys as run-time parameters
	u.RawQuery = q.Encode()
	dsn := u.String()

	db, err := sqlx.ConnectContext(ctx, "postgres", dsn)
	if err != nil {
		t.Fatalf("connect to test schema: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Apply(ctx, db.DB, migrations.Postgres); err != nil {
		t.Fatalf("apply migrations: %v", err)
	}
	return db, dsn
}
