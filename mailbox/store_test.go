package mailbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

func event(n int64, delivery, body string) forge.Event {
	return forge.Event{Forge: "gl", Kind: forge.KindGitLab, DeliveryID: delivery, BodyHash: body,
		Type: forge.EventComment, Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n},
		Sender: forge.User{Login: "alice"}, Comment: &forge.Comment{Body: "hi"}}
}

func TestDeliverDeduplicatesByDeliveryIdentityOnly(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	s := mailbox.NewStore(db)
	ctx := context.Background()
	dup, err := s.Deliver(ctx, event(1, "d1", "h1"))
	require.NoError(t, err)
	require.False(t, dup)
	dup, err = s.Deliver(ctx, event(1, "d1", "h1"))
	require.NoError(t, err)
	require.True(t, dup, "same delivery id and body (a GitLab retry)")
	dup, err = s.Deliver(ctx, event(1, "d2", "h1"))
	require.NoError(t, err)
	require.False(t, dup, "identical bodies under a new id are a new event (assign, unassign, assign)")
	dup, err = s.Deliver(ctx, event(1, "d3", "h1"))
	require.NoError(t, err)
	require.False(t, dup)
	dup, err = s.Deliver(ctx, event(1, "d1", "h9"))
	require.NoError(t, err)
	require.False(t, dup, "the same id with another body is kept")
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	evs, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 4)
}

func TestPipelineOfNoMailboxIsIgnored(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	s := mailbox.NewStore(db)
	ev := forge.Event{Forge: "gl", DeliveryID: "p1", BodyHash: "p1", Type: forge.EventPipeline,
		Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop"}, Pipeline: &forge.Pipeline{Ref: "main", SHA: "abc"}}
	_, err := s.Deliver(context.Background(), ev)
	var ignore *forge.IgnoreError
	require.ErrorAs(t, err, &ignore)
}

// Two processes (two pools on one database) compete for due mailboxes: each mailbox is held by
// exactly one of them at a time, and an expired lease is claimed again.
func TestLeaseIsExclusiveAndRescued(t *testing.T) {
	t.Parallel()
	db, dsn := pgtest.New(t)
	other := sqlx.MustConnect("postgres", dsn)
	t.Cleanup(func() { _ = other.Close() })
	a, b := mailbox.NewStore(db), mailbox.NewStore(other)
	ctx := context.Background()
	for n := int64(1); n <= 20; n++ {
		_, err := a.Deliver(ctx, event(n, "d"+string(rune('a'+n)), "h"+string(rune('a'+n))))
		require.NoError(t, err)
	}

	var mu sync.Mutex
	held := map[int64]string{}
	var wg sync.WaitGroup
	for i, s := range []*mailbox.Store{a, b, a, b} {
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
