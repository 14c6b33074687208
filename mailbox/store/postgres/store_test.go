package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
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
// exactly one of them at a time, and an expired lease is claimed again.
func TestLeaseIsExclusiveAndRescued(t *testing.T) {
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

	var mu sync.Mutex
	held := map[int64]string{}
	var wg sync.WaitGroup
	for i, s := range []*sqlstore.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := []string{"p1", "p2", "p3", "p4"}[i]
			for {
				mb, err := s.Lease(ctx, owner, time.Minute)
				require.NoError(t, err)
				if mb == nil {
					return
				}
				mu.Lock()
				prev, dup := held[mb.ID]
				held[mb.ID] = owner
				mu.Unlock()
				require.False(t, dup, "mailbox %d leased by %s and %s", mb.ID, prev, owner)
			}
		}()
	}
	wg.Wait()
	require.Len(t, held, 20)

	// Every lease is live: nothing is due. Extend works for the owner only.
	mb, err := a.Lease(ctx, "p5", time.Minute)
	require.NoError(t, err)
	require.Nil(t, mb)
	var id int64
	var owner string
	for id, owner = range held {
		break
	}
	require.NoError(t, a.Extend(ctx, id, owner, time.Minute))
	require.ErrorIs(t, a.Extend(ctx, id, "intruder", time.Minute), mailbox.ErrLeaseLost)

	// The holder dies: once its lease expires the mailbox is claimed again (rescued).
	require.NoError(t, a.Extend(ctx, id, owner, time.Millisecond))
	time.Sleep(20 * time.Millisecond)
	require.ErrorIs(t, a.Extend(ctx, id, owner, time.Minute), mailbox.ErrLeaseLost)
	n, err := a.ExpiredLeases(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	mb, err = b.Lease(ctx, "p6", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, mb)
	require.Equal(t, id, mb.ID)

	// A failed step releases with a backoff: not due again before it passes.
	require.NoError(t, b.Release(ctx, id, "p6", time.Hour))
	mb, err = a.Lease(ctx, "p7", time.Minute)
	require.NoError(t, err)
	require.Nil(t, mb)
}
