package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // SQLite driver

	"github.com/alfred-bot/alfred/migrations"
)

func TestSQLiteApplyIsIdempotentAndVersioned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "alfred.db")+"?_foreign_keys=1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	v, err := migrations.Version(ctx, db, migrations.SQLite)
	require.NoError(t, err)
	require.EqualValues(t, 0, v)
	require.NoError(t, migrations.Apply(ctx, db, migrations.SQLite))
	require.NoError(t, migrations.Apply(ctx, db, migrations.SQLite))
	v, err = migrations.Version(ctx, db, migrations.SQLite)
	require.NoError(t, err)
	require.EqualValues(t, newest(t, migrations.SQLite), v)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM executors WHERE adapter = ''`).Scan(&n))
}

// The SQLite down migrations undo their up migrations: all the way down and up again.
func TestSQLiteDownAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "alfred.db")+"?_foreign_keys=1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	fsys, err := migrations.Files(migrations.SQLite)
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithTableName("alfred_schema_version"))
	require.NoError(t, err)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 0)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'mailboxes'`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, migrations.Apply(ctx, db, migrations.SQLite))
	v, err := migrations.Version(ctx, db, migrations.SQLite)
	require.NoError(t, err)
	require.EqualValues(t, newest(t, migrations.SQLite), v)
}
