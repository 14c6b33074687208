package migrations_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/migrations"
)

var migrationName = regexp.MustCompile(`^[0-9]{4}_[a-z0-9_]+\.sql$`)

// names lists the migration files of d, failing on a file that is not NNNN_name.sql.
func names(t *testing.T, d migrations.Dialect) []string {
	t.Helper()
	fsys, err := migrations.Files(d)
	require.NoError(t, err)
	got, err := fs.Glob(fsys, "*")
	require.NoError(t, err)
	var out []string
	for _, n := range got {
		if n == "sqlite" && d == migrations.Postgres {
			continue // the directory of the SQLite translations
		}
		require.Regexp(t, migrationName, n, "%s migration file name", d)
		out = append(out, n)
	}
	return out
}

// newest is the number of d's newest migration: the schema version once all are applied (the
// numbers may leave gaps).
func newest(t *testing.T, d migrations.Dialect) int64 {
	t.Helper()
	all := names(t, d)
	require.NotEmpty(t, all)
	n, err := strconv.ParseInt(all[len(all)-1][:4], 10, 64)
	require.NoError(t, err)
	return n
}

// TestDialectsInStep fails when PostgreSQL has a migration SQLite lacks, or the reverse: each
// number must carry the same name on both sides.
func TestDialectsInStep(t *testing.T) {
	t.Parallel()
	pg, lite := names(t, migrations.Postgres), names(t, migrations.SQLite)
	require.NotEmpty(t, pg)
	require.Equal(t, pg, lite, "migrations/ and migrations/sqlite/ must hold the same numbered files")
}

func TestUnknownDialect(t *testing.T) {
	t.Parallel()
	_, err := migrations.Files("mysql")
	require.ErrorContains(t, err, `unknown dialect "mysql"`)
}
