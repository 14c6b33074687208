package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

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
	require.EqualValues(t, len(names(t, migrations.SQLite)), v)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM executors WHERE adapter = ''`).Scan(&n))
}
