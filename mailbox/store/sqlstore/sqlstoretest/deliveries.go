package sqlstoretest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/migrations"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// A burst of concurrent deliveries into known mailboxes (grouped into shared statements): every
// distinct delivery is stored once and answered as new exactly once, its retries in the same
// burst are duplicates, a delivery id that comes with two bodies keeps both, and each
// mailbox's inbox holds exactly its deliveries.
func concurrentDeliveries(t *testing.T, s *sqlstore.Store, _ *storetest.Clock) {
	ctx := context.Background()
	const issues, distinct = 5, 200
	for n := int64(1); n <= issues; n++ {
		_, err := s.Deliver(ctx, storetest.Event(n, fmt.Sprintf("first-%d", n), fmt.Sprintf("first-%d", n)))
		require.NoError(t, err)
	}
	var burst []forge.Event
	for i := range distinct {
		ev := storetest.Event(int64(1+i%issues), fmt.Sprintf("c%d", i), fmt.Sprintf("h%d", i))
		burst = append(burst, ev)
		if i%10 == 0 { // the forge retried it at once, twice
			burst = append(burst, ev, ev)
		}
		if i%25 == 0 { // the same delivery id with another body
			other := ev
			other.BodyHash = fmt.Sprintf("other-%d", i)
			burst = append(burst, other)
		}
	}
	type answer struct {
		key string
		dup bool
		err error
	}
	answers := make([]answer, len(burst))
	var wg sync.WaitGroup
	for i, ev := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dup, err := s.Deliver(ctx, ev)
			answers[i] = answer{key: ev.DeliveryID + "/" + ev.BodyHash, dup: dup, err: err}
		}()
	}
	wg.Wait()

	fresh := map[string]int{}
	for _, a := range answers {
		require.NoError(t, a.err, a.key)
		if !a.dup {
			fresh[a.key]++
		}
	}
	wantStored := distinct + (distinct+24)/25
	require.Len(t, fresh, wantStored, "every distinct delivery answered as new")
	for key, n := range fresh {
		require.Equal(t, 1, n, "%s answered as new once", key)
	}
	total := 0
	for n := int64(1); n <= issues; n++ {
		mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n})
		require.NoError(t, err)
		evs := mustPending(t, s, mb.ID)
		for _, e := range evs {
			require.Equal(t, n, e.Event.Target.Number, "event %s in its own mailbox", e.Event.DeliveryID)
		}
		total += len(evs)
	}
	require.Equal(t, issues+wantStored, total, "stored once each")
}

// The schema version is the number of the newest migration file of the store's engine.
func schemaVersion(t *testing.T, s *sqlstore.Store, _ *storetest.Clock) {
	fsys, err := migrations.Files(s.Dialect().Name)
	require.NoError(t, err)
	names, err := fs.Glob(fsys, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	newest, err := strconv.ParseInt(strings.SplitN(slices.Max(names), "_", 2)[0], 10, 64)
	require.NoError(t, err)
	v, err := s.SchemaVersion(context.Background())
	require.NoError(t, err)
	require.Equal(t, newest, v)
}

// A delivery id that comes again with another body is stored again and logged, whether the
// two arrive one after the other or in one grouped insert.
func sameDeliveryOtherBody(t *testing.T, s *sqlstore.Store, _ *storetest.Clock) {
	// Deliver logs in its caller's goroutine, so one buffer written and read here suffices.
	var logs bytes.Buffer
	s.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	for _, body := range []string{"h1", "h2"} {
		dup, err := s.Deliver(ctx, storetest.Event(1, "d1", body))
		require.NoError(t, err)
		require.False(t, dup)
	}
	require.Contains(t, logs.String(), "a delivery id came again with another body; both are kept")
	require.Contains(t, logs.String(), "delivery_id=d1")
}
