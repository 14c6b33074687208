package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/pgtest"
	"github.com/alfred-bot/alfred/mailbox/store/postgres"
	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox/store/sqlstore/sqlstoretest"
	"github.com/alfred-bot/alfred/mailbox/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	sqlstoretest.Run(t, func(t *testing.T, now func() time.Time) *sqlstore.Store {
		db, _ := pgtest.New(t)
		return postgres.New(db, now)
	})
}

// Two processes (two pools on one database) compete for due mailboxes: each mailbox is held by
// exactly one of them at a time.
func TestLeaseIsExclusiveAcrossPools(t *testing.T) {
	t.Parallel()
	db, dsn := pgtest.New(t)
	other := sqlx.MustConnect("postgres", dsn)
	t.Cleanup(func() { _ = other.Close() })
	a, b := postgres.New(db, nil), postgres.New(other, nil)
	ctx := context.Background()
	for n := int64(1); n <= 20; n++ {
		_, err := a.Deliver(ctx, storetest.Event(n, "d"+string(rune('a'+n)), "h"+string(rune('a'+n))))
		require.NoError(t, err)
	}

	held := storetest.LeaseConcurrently(t, a, b, a, b)
	require.Len(t, held, 20)
	// Expiry, rescue and backoff are in the conformance suite (storetest), on one pool.
}

func TestSameDeliveryIDWithAnotherBodyIsKeptAndLogged(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	var logs bytes.Buffer
	s := postgres.New(db, nil).WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	for _, body := range []string{"h1", "h2"} {
		dup, err := s.Deliver(ctx, storetest.Event(1, "d1", body))
		require.NoError(t, err)
		require.False(t, dup)
	}
	require.Contains(t, logs.String(), "a delivery id came again with another body; both are kept")
	require.Contains(t, logs.String(), "delivery_id=d1")
}
