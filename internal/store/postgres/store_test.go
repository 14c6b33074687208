package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/store/sqlstore/sqlstoretest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/webhook/forge"
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

// Deliveries that arrive while the flushers are busy are inserted together, and each still
// gets its own answer: a value the database refuses fails its group, which is then inserted
// one delivery at a time, so only that delivery is refused; a retry in the same group is a
// duplicate; a delivery id stored before with another body is logged.
func TestGroupedInsertsAnswerEachDelivery(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	var logs bytes.Buffer
	s := postgres.New(db, nil).WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	for _, ev := range []forge.Event{storetest.Event(1, "first", "first"), storetest.Event(1, "twin", "body-1")} {
		_, err := s.Deliver(ctx, ev)
		require.NoError(t, err)
	}
	base := s.InsertStats()

	// Hold the inserts: every delivery below waits for a flusher or in a flusher's statement.
	lock, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	// Released at the latest when the test ends, failed or not: the schema's drop waits for it.
	t.Cleanup(func() { _ = lock.Rollback() })
	_, err = lock.ExecContext(ctx, `LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	var burst []forge.Event
	for i := range 16 {
		burst = append(burst, storetest.Event(1, fmt.Sprintf("d%d", i), fmt.Sprintf("h%d", i)))
	}
	retried := storetest.Event(1, "retried", "retried")
	burst = append(burst, retried, retried, storetest.Event(1, "twin", "body-2"), storetest.Event(1, "bad\x00id", "bad"))
	answers := make([]error, len(burst))
	dups := make([]bool, len(burst))
	var wg sync.WaitGroup
	for i, ev := range burst {
		wg.Add(1)
		go func() { defer wg.Done(); dups[i], answers[i] = s.Deliver(ctx, ev) }()
	}
	// Every delivery waits for a flusher or in a held statement. How they split depends on the
	// scheduler: senders that were all ready before a flusher ran are taken into one statement
	// (up to 64 a statement), and none waits. Either way some statement carries several: 20
	// deliveries, one flusher holding one statement.
	require.Eventually(t, func() bool {
		st := s.InsertStats()
		return st.Waiting+st.Deliveries-base.Deliveries >= int64(len(burst))
	}, 30*time.Second, time.Millisecond, "every delivery waits for a flusher or in a held statement")
	require.NoError(t, lock.Rollback())
	wg.Wait()

	st := s.InsertStats()
	require.Greater(t, st.Deliveries-base.Deliveries, st.Statements-base.Statements, "some statement carried several deliveries")
	fresh := 0
	for i, ev := range burst {
		if ev.DeliveryID == "bad\x00id" {
			require.ErrorIs(t, answers[i], forge.ErrBadPayload)
			continue
		}
		require.NoError(t, answers[i], ev.DeliveryID)
		if !dups[i] {
			fresh++
		}
	}
	require.Equal(t, 16+1+1, fresh, "the retry is a duplicate, every other delivery is new")
	var stored int
	require.NoError(t, db.GetContext(ctx, &stored, `SELECT count(*) FROM events`))
	require.Equal(t, 2+fresh, stored)
	require.Contains(t, logs.String(), "delivery_id=twin")
}

// A delivery is answered with what happened to its own row: one whose context ended while its
// group's statement ran (the group runs to the latest deadline in it) waits for the statement
// and is answered stored, never with an error for a row that was committed (the forge would
// count a failure, and its retry would be a duplicate that wakes nobody). A delivery whose
// context ends while it still waits for a flusher is answered with the error and not stored.
func TestGroupedInsertAnswersTheCommitPastADeadline(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1, postgres.Dialect.InsertFlushers, "the holds below keep the one flusher busy")
	db, _ := pgtest.New(t)
	s := postgres.New(db, nil)
	ctx := context.Background()
	for _, n := range []int64{1, 2} { // two known mailboxes: the groups below go into them
		_, err := s.Deliver(ctx, storetest.Event(n, fmt.Sprintf("first-%d", n), "first"))
		require.NoError(t, err)
	}
	// Row locks on both mailboxes hold a statement inserting into one at its foreign key check:
	// the first group (one delivery into issue 1's mailbox) keeps the flusher (the dialect has
	// one, InsertFlushers) busy while the
	// deliveries below queue, then they go into issue 2's mailbox together and are held there.
	hold := func(n int64) *sqlx.Tx {
		tx, err := db.BeginTxx(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback() }) // the schema's drop waits for it
		_, err = tx.ExecContext(ctx, `SELECT id FROM mailboxes WHERE number = $1 FOR UPDATE`, n)
		require.NoError(t, err)
		return tx
	}
	first, second := hold(1), hold(2)
	base := s.InsertStats()
	go func() { _, _ = s.Deliver(ctx, storetest.Event(1, "blocker", "blocker")) }()
	require.Eventually(t, func() bool { return s.InsertStats().Deliveries-base.Deliveries >= 1 },
		30*time.Second, time.Millisecond, "the first group is in a held statement")
	held := s.InsertStats()

	// Even deliveries have the earlier deadline, and their contexts end while their statement
	// is held; odd ones run to their later deadline. late waits for a flusher when it ends.
	short, cancelShort := context.WithDeadline(ctx, time.Now().Add(time.Minute))
	defer cancelShort()
	long, cancelLong := context.WithDeadline(ctx, time.Now().Add(2*time.Minute))
	defer cancelLong()
	const n = 24
	answers := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		c := long
		if i%2 == 0 {
			c = short
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, answers[i] = s.Deliver(c, storetest.Event(2, fmt.Sprintf("d%d", i), fmt.Sprintf("h%d", i)))
		}()
	}
	require.Eventually(t, func() bool { return s.InsertStats().Waiting >= n }, 30*time.Second, time.Millisecond,
		"every delivery waits for a flusher")
	require.NoError(t, first.Rollback())
	require.Eventually(t, func() bool { return s.InsertStats().Deliveries-held.Deliveries >= n }, 30*time.Second,
		time.Millisecond, "every delivery is in a statement held at issue 2's mailbox")
	late, cancelLate := context.WithCancel(ctx)
	lateAnswer := make(chan error, 1)
	go func() { _, err := s.Deliver(late, storetest.Event(2, "late", "late")); lateAnswer <- err }()
	require.Eventually(t, func() bool { return s.InsertStats().Waiting >= 1 }, 30*time.Second, time.Millisecond,
		"the late delivery waits for a flusher")
	cancelShort()
	cancelLate()
	require.ErrorIs(t, <-lateAnswer, context.Canceled)
	require.NoError(t, second.Rollback())
	wg.Wait()

	for i, err := range answers {
		require.NoError(t, err, "d%d was in a statement that committed", i)
		var stored int
		require.NoError(t, db.GetContext(ctx, &stored, `SELECT count(*) FROM events WHERE delivery_id = $1`, fmt.Sprintf("d%d", i)))
		require.Equal(t, 1, stored, "d%d", i)
	}
	var lateStored int
	require.NoError(t, db.GetContext(ctx, &lateStored, `SELECT count(*) FROM events WHERE delivery_id = 'late'`))
	require.Zero(t, lateStored, "a delivery answered with its context's error is not stored")
}

// The event claim picks a few of the least recently updated due mailboxes before locking one;
// when every one it picked is locked by another claim or save in progress, it still claims a
// due mailbox that is not, the least recently updated of them.
func TestLeaseEventsPastLockedRows(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	s := postgres.New(db, nil)
	ctx := context.Background()
	for n := int64(1); n <= 80; n++ {
		_, err := s.Deliver(ctx, storetest.Event(n, fmt.Sprintf("d%d", n), fmt.Sprintf("h%d", n)))
		require.NoError(t, err)
	}
	var order []int64
	require.NoError(t, db.SelectContext(ctx, &order, `SELECT id FROM mailboxes ORDER BY updated_at, id`))
	const locked = 70
	tx, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	var held []int64
	require.NoError(t, tx.SelectContext(ctx, &held, `SELECT id FROM mailboxes WHERE id = ANY($1) FOR UPDATE`, pq.Array(order[:locked])))
	require.Len(t, held, locked)

	mb, err := s.LeaseEvents(ctx, "w", time.Minute, nil)
	require.NoError(t, err)
	require.NotNil(t, mb, "a due mailbox whose row is not locked is claimed")
	require.Equal(t, order[locked], mb.ID, "the least recently updated of the unlocked due mailboxes")
	require.Equal(t, "w", *mb.LeaseOwner, "the claimed mailbox is returned as claimed")
}

// TestKnownReposInByteOrderUnderALanguageCollation: a database created under a language
// collation (en_US.UTF-8, the official postgres image's default) orders "Zeta/app" among the
// z's, while reconciliation binary-searches the known repositories in byte order: each is
// found. The test database is C.UTF-8, so the column takes ICU's en-US collation here.
func TestKnownReposInByteOrderUnderALanguageCollation(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `ALTER TABLE mailboxes ALTER COLUMN repo TYPE text COLLATE "en-US-x-icu"`)
	require.NoError(t, err)
	s := postgres.New(db, nil)
	repos := []string{"alpha/app", "Zeta/app", "beta/app", "Acme/Shop"}
	for i, repo := range repos {
		ev := storetest.Event(int64(i+1), repo, repo)
		ev.Target.Repo = repo
		_, err := s.Deliver(ctx, ev)
		require.NoError(t, err)
	}
	known, err := s.KnownRepos(ctx, "gl")
	require.NoError(t, err)
	require.Equal(t, []string{"Acme/Shop", "Zeta/app", "alpha/app", "beta/app"}, known)
}

// TestRunsPerProjectHoldsUnderConcurrentClaims: runs_per_project is 1 and two development runs
// of one repository are due. Replica A's claim of the first is under way (its transaction not
// committed yet) when replica B claims: B waits for A's claim, then counts its lease and takes
// nothing. Without the claims' lock B counted in its own snapshot (no live run yet) and took
// the second: two runs of the repository at once.
func TestRunsPerProjectHoldsUnderConcurrentClaims(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	s := postgres.New(db, nil)
	ctx := context.Background()
	var ids []int64
	for n := int64(1); n <= 2; n++ {
		mb := storetest.Settled(t, s, n, func(mb *mailbox.Mailbox) {
			wake := time.Now().Add(-time.Minute)
			mb.State, mb.WakeAt = mailbox.StateInDevelopment, &wake
		})
		ids = append(ids, mb.ID)
	}

	// Replica A's claim, as LeaseRun makes it, not committed yet.
	tx, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.ExecContext(ctx, postgres.Dialect.RunClaimLock)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `UPDATE mailboxes SET lease_owner = 'replica-a/1', lease_expires_at = now() + interval '1 minute' WHERE id = $1`, ids[0])
	require.NoError(t, err)

	type claim struct {
		mb  *mailbox.Mailbox
		err error
	}
	b := make(chan claim, 1)
	go func() {
		mb, err := s.LeaseRun(ctx, "replica-b/1", time.Minute, mailbox.RunStates(), 1)
		b <- claim{mb, err}
	}()
	select {
	case c := <-b:
		t.Fatalf("replica B claimed while A's claim was under way: %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit())
	c := <-b
	require.NoError(t, c.err)
	require.Nil(t, c.mb, "the repository has its one run under a live lease")
}
