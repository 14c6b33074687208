package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/migrations"
)

// The migration that keeps the latest edit of each shadow comment deletes the earlier edits of
// the rows written before it, and nothing else: on PostgreSQL and on SQLite.
func TestShadowEditsCompacted(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		db, _ := pgtest.New(t)
		shadowEditsCompacted(t, db.DB, migrations.Postgres, goose.DialectPostgres)
	})
	t.Run("sqlite", func(t *testing.T) {
		db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "alfred.db")+"?_foreign_keys=1")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		require.NoError(t, migrations.Apply(context.Background(), db, migrations.SQLite))
		shadowEditsCompacted(t, db, migrations.SQLite, goose.DialectSQLite3)
	})
}

func shadowEditsCompacted(t *testing.T, db *sql.DB, d migrations.Dialect, gd goose.Dialect) {
	ctx := context.Background()
	fsys, err := migrations.Files(d)
	require.NoError(t, err)
	files, err := fs.Glob(fsys, "*_bounded_by_work.sql")
	require.NoError(t, err)
	require.Len(t, files, 1)
	version, err := strconv.ParseInt(files[0][:4], 10, 64)
	require.NoError(t, err)
	p, err := goose.NewProvider(gd, db, fsys, goose.WithTableName("alfred_schema_version"))
	require.NoError(t, err)
	_, err = p.DownTo(ctx, version-1)
	require.NoError(t, err)

	// Comment -1 on issue 1 edited three times, comment 42 once, comment -1 of issue 2 twice,
	// and a posted comment (kind comment) beside them.
	rows := []struct {
		number    int
		kind      string
		commentID int
		body      string
	}{
		{1, "comment", 0, "posted"}, {1, "edit_comment", -1, "a"}, {1, "edit_comment", 42, "forge"},
		{1, "edit_comment", -1, "b"}, {2, "edit_comment", -1, "x"}, {1, "edit_comment", -1, "c"},
		{2, "edit_comment", -1, "y"},
	}
	for _, r := range rows {
		_, err := db.ExecContext(ctx, `INSERT INTO shadow_writes (forge, repo, number, kind, comment_id, body, at)
			VALUES ('gl', 'acme/shop', $1, $2, $3, $4, CURRENT_TIMESTAMP)`, r.number, r.kind, r.commentID, r.body)
		require.NoError(t, err)
	}
	_, err = p.Up(ctx)
	require.NoError(t, err)

	q, err := db.QueryContext(ctx, `SELECT number, kind, comment_id, body FROM shadow_writes ORDER BY id`)
	require.NoError(t, err)
	defer q.Close()
	var got []string
	for q.Next() {
		var n, id int
		var kind, body string
		require.NoError(t, q.Scan(&n, &kind, &id, &body))
		got = append(got, strconv.Itoa(n)+" "+kind+" "+strconv.Itoa(id)+" "+body)
	}
	require.NoError(t, q.Err())
	require.Equal(t, []string{"1 comment 0 posted", "1 edit_comment 42 forge", "1 edit_comment -1 c", "2 edit_comment -1 y"}, got)
}
