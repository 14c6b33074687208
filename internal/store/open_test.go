package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/migrations"
)

func TestEngine(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]struct {
		d    migrations.Dialect
		path string
	}{
		"":                              {migrations.SQLite, "/data/alfred.db"},
		"sqlite:other.db":               {migrations.SQLite, "/data/other.db"},
		"sqlite:///var/lib/alfred.db":   {migrations.SQLite, "/var/lib/alfred.db"},
		"postgres://u:p@db:5432/alfred": {migrations.Postgres, ""},
		"postgresql://db/alfred":        {migrations.Postgres, ""},
		"host=db user=alfred dbname=x":  {migrations.Postgres, ""},
	} {
		d, path := store.Engine(url, "/data")
		require.Equal(t, want.d, d, url)
		require.Equal(t, want.path, path, url)
	}
}

func TestOpenSQLiteByDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.Open(ctx, "", dir, postgres.Pool{}, nil)
	require.NoError(t, err)
	require.Equal(t, migrations.SQLite, s.Dialect().Name)
	require.FileExists(t, filepath.Join(dir, "alfred.db"))
	_, err = store.Open(ctx, "", dir, postgres.Pool{}, nil)
	require.ErrorIs(t, err, sqlite.ErrLocked)
	require.NoError(t, s.Close())
	s, err = store.Open(ctx, "", dir, postgres.Pool{}, nil)
	require.NoError(t, err, "closing the store released the lock")
	require.NoError(t, s.Close())
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	_, dsn := pgtest.New(t)
	s, err := store.Open(context.Background(), dsn, t.TempDir(), postgres.Pool{}, nil)
	require.NoError(t, err)
	require.Equal(t, migrations.Postgres, s.Dialect().Name)
	require.NoError(t, s.Ping(context.Background()))
	require.NoError(t, s.Close())
}
