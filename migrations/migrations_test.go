package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/migrations"
)

func TestApplyIsIdempotentAndVersioned(t *testing.T) {
	db, _ := pgtest.New(t) // applies once
	ctx := context.Background()
	require.NoError(t, migrations.Apply(ctx, db.DB, migrations.Postgres))
	v, err := migrations.Version(ctx, db.DB, migrations.Postgres)
	require.NoError(t, err)
	require.EqualValues(t, newest(t, migrations.Postgres), v)
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM mailboxes`))
}
