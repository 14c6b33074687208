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
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
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

// One SaveProcessed marks any number of event groups with their outcomes (more ids than one
// statement takes), saves the mailbox with them, and touches no other mailbox's events.
func saveProcessedGroups(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	const events = 1100
	var wg sync.WaitGroup
	const senders = 10
	for w := range senders {
		wg.Go(func() {
			for i := w; i < events; i += senders {
				_, err := s.Deliver(ctx, storetest.Event(1, fmt.Sprintf("g%d", i), fmt.Sprintf("g%d", i)))
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	_, err := s.Deliver(ctx, storetest.Event(2, "other", "other"))
	require.NoError(t, err)
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	evs := mustPending(t, s, mb.ID)
	require.Equal(t, events, len(evs))
	var done []mailbox.Processed
	for _, e := range evs[:events-50] {
		done = append(done, mailbox.Processed{IDs: []int64{e.ID}, Outcome: "comment recorded"})
	}
	folded := mailbox.Processed{Outcome: "labels recorded"}
	for _, e := range evs[events-50:] {
		folded.IDs = append(folded.IDs, e.ID)
	}
	done = append(done, folded)
	c.Add(time.Minute)
	mb.Title = "saved with the marks"
	require.NoError(t, s.SaveProcessed(ctx, mb, done))

	require.Empty(t, mustPending(t, s, mb.ID))
	got, err := s.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, "saved with the marks", got.Title)
	var outcomes []struct {
		Outcome string `db:"outcome"`
		N       int    `db:"n"`
		Marked  int    `db:"marked"`
	}
	require.NoError(t, s.DB().SelectContext(ctx, &outcomes, `SELECT outcome, count(*) AS n,
		sum(CASE WHEN processed_at = $2 THEN 1 ELSE 0 END) AS marked
		FROM events WHERE mailbox_id = $1 GROUP BY outcome ORDER BY outcome`, mb.ID, c.Now()))
	require.Len(t, outcomes, 2)
	require.Equal(t, "comment recorded", outcomes[0].Outcome)
	require.Equal(t, events-50, outcomes[0].N)
	require.Equal(t, "labels recorded", outcomes[1].Outcome)
	require.Equal(t, 50, outcomes[1].N)
	require.Equal(t, events-50, outcomes[0].Marked, "processed at the store's clock")
	other, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 2})
	require.NoError(t, err)
	require.Len(t, mustPending(t, s, other.ID), 1, "another mailbox's event stays pending")

	// Groups of one outcome (PostgreSQL saves them with their marks in one statement,
	// Dialect.SaveProcessed, the ids one array parameter), few and more than the 500 ids of one
	// IN list.
	for _, n := range []int{3, 501} {
		for i := range n - 1 {
			_, err := s.Deliver(ctx, storetest.Event(2, fmt.Sprintf("one-%d-%d", n, i), fmt.Sprintf("one-%d-%d", n, i)))
			require.NoError(t, err)
		}
		evs := mustPending(t, s, other.ID)
		require.Len(t, evs, n)
		first := mailbox.Processed{Outcome: fmt.Sprintf("answer %d recorded", n)}
		for _, e := range evs[:n-1] {
			first.IDs = append(first.IDs, e.ID)
		}
		rest := mailbox.Processed{Outcome: first.Outcome, IDs: []int64{evs[n-1].ID}}
		c.Add(time.Minute)
		other.Title = fmt.Sprintf("saved with %d marks", n)
		require.NoError(t, s.SaveProcessed(ctx, other, []mailbox.Processed{first, rest}))
		require.Empty(t, mustPending(t, s, other.ID))
		got, err := s.Get(ctx, other.ID)
		require.NoError(t, err)
		require.Equal(t, other.Title, got.Title)
		require.True(t, got.UpdatedAt.Equal(c.Now()))
		var marked int
		require.NoError(t, s.DB().GetContext(ctx, &marked, `SELECT count(*) FROM events
			WHERE mailbox_id = $1 AND outcome = $2 AND processed_at = $3`, other.ID, first.Outcome, c.Now()))
		require.Equal(t, n, marked, "every event marked with its outcome at the save's instant")
		_, err = s.Deliver(ctx, storetest.Event(2, fmt.Sprintf("next-%d", n), fmt.Sprintf("next-%d", n)))
		require.NoError(t, err)
	}
}

// eventsRecordedOnArrival: a comment (mailbox.InertAtRest) into a mailbox at rest whose events
// are all applied is stored processed, at the store's clock, with mailbox.OutcomeAtRest, and
// waits for no pass; the first event of a mailbox, a comment behind a pending event, a comment
// in a working state and a comment on a merge request wait. Under concurrent deliveries
// (grouped inserts) no comment is recorded on arrival behind a pending event of its mailbox.
func eventsRecordedOnArrival(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	seq := 0
	arrive := func(ev forge.Event) bool {
		t.Helper()
		seq++
		ev.DeliveryID, ev.BodyHash = fmt.Sprintf("rest-%d", seq), fmt.Sprintf("rest-%d", seq)
		dup, pending, err := s.Arrive(ctx, ev)
		require.NoError(t, err)
		require.False(t, dup)
		return pending
	}
	settle := func(mb *mailbox.Mailbox, state mailbox.State) {
		t.Helper()
		var ids []int64
		for _, e := range mustPending(t, s, mb.ID) {
			ids = append(ids, e.ID)
		}
		mb.State = state
		require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: ids, Outcome: "applied"}}))
	}
	comment := func() forge.Event { return storetest.Comment(1, "", "") }

	require.True(t, arrive(comment()), "a mailbox's first event waits")
	require.True(t, arrive(comment()), "behind a pending event")
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	settle(mb, mailbox.StateIdle)
	c.Add(time.Minute)
	at := c.Now()
	require.False(t, arrive(comment()), "idle, nothing pending")
	edit := comment()
	edit.Type = forge.EventCommentEdited
	require.False(t, arrive(edit), "an edit of a comment")
	var rows []struct {
		Outcome     string    `db:"outcome"`
		ProcessedAt time.Time `db:"processed_at"`
	}
	require.NoError(t, s.DB().SelectContext(ctx, &rows, `SELECT outcome, processed_at FROM events WHERE mailbox_id = $1 AND outcome = $2 ORDER BY id`,
		mb.ID, mailbox.OutcomeAtRest))
	require.Len(t, rows, 2)
	require.True(t, at.Equal(rows[0].ProcessedAt), "processed at the store's clock: %s", rows[0].ProcessedAt)
	require.Empty(t, mustPending(t, s, mb.ID))

	require.True(t, arrive(storetest.Event(1, "", "")), "an issue edit is not inert")
	require.True(t, arrive(comment()), "a comment behind it")
	settle(mb, mailbox.StateWaitingInfo)
	require.True(t, arrive(comment()), "Alfred works on the issue")
	for _, st := range []mailbox.State{mailbox.StateDone, mailbox.StateCancelled, mailbox.StateIdle} {
		settle(mb, st)
		require.False(t, arrive(comment()), "%s, nothing pending", st)
	}
	// A closed mailbox retention has purged: its comment waits, so that the pass saves the
	// mailbox and retention lists it again (Purgeable).
	require.True(t, arrive(storetest.Comment(3, "", "")), "issue 3's first event")
	old, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 3})
	require.NoError(t, err)
	closedAt := c.Now()
	old.ClosedAt = &closedAt
	settle(old, mailbox.StateDone)
	require.False(t, arrive(storetest.Comment(3, "", "")), "done, not purged")
	require.NoError(t, s.Purge(ctx, old.ID))
	require.True(t, arrive(storetest.Comment(3, "", "")), "done and purged")

	onMR := comment()
	onMR.Target.MergeRequest = true
	require.True(t, arrive(onMR), "a merge request's first event")
	mr, err := s.Find(ctx, onMR.Target)
	require.NoError(t, err)
	settle(mr, mailbox.StateIdle)
	require.True(t, arrive(onMR), "a comment on a merge request is not inert")

	// Concurrent comments with an issue edit among them: whatever groups they formed, every
	// event after the first pending one of the mailbox is pending too (one statement in flight
	// at a time, Dialect.InsertFlushers, on both engines).
	settle(mb, mailbox.StateIdle)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				ev := storetest.Comment(1, fmt.Sprintf("c-%d-%d", w, i), fmt.Sprintf("c-%d-%d", w, i))
				if w == 3 && i == 20 {
					ev = storetest.Event(1, "edit-3-20", "edit-3-20")
				}
				_, _, err := s.Arrive(ctx, ev)
				assert.NoError(t, err) // not require: FailNow must not run outside the test's goroutine
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())
	type stored struct {
		ID      int64 `db:"id"`
		Pending bool  `db:"pending"`
	}
	var order []stored
	require.NoError(t, s.DB().SelectContext(ctx, &order, `SELECT id, processed_at IS NULL AS pending FROM events
		WHERE mailbox_id = $1 AND (delivery_id LIKE 'c-%' OR delivery_id = 'edit-3-20') ORDER BY id`, mb.ID))
	require.Len(t, order, 320)
	first := slices.IndexFunc(order, func(r stored) bool { return r.Pending })
	require.GreaterOrEqual(t, first, 0, "the issue edit waits")
	for _, r := range order[first:] {
		require.True(t, r.Pending, "event %d recorded on arrival behind pending event %d", r.ID, order[first].ID)
	}
	require.Positive(t, first, "the comments before the edit were recorded on arrival")
}
