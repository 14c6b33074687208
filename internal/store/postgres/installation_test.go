package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Two replicas (two worker sets, each on its own pool) share one PostgreSQL store. A drain set
// through replica a (as its pages do) reaches replica b at b's next poll of the row (half a
// second):
// both record themselves draining, then drained, and b's Draining (what /readyz answers)
// says so. Undraining resumes both.
func TestInstallationDrainReachesEveryReplica(t *testing.T) {
	t.Parallel()
	db, dsn := pgtest.New(t)
	other := sqlx.MustConnect("postgres", dsn)
	t.Cleanup(func() { _ = other.Close() })
	a, b := postgres.New(db, nil), postgres.New(other, nil)
	wa := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "replica-a", Count: 1}, a, nil, nil)
	wb := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "replica-b", Count: 1}, b, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { wa.Run(ctx); done <- struct{}{} }()
	go func() { wb.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })

	want := func(draining bool) func([]mailbox.Replica) bool {
		return func(rs []mailbox.Replica) bool {
			return len(rs) >= 2 && rs[0].Draining == draining && rs[0].Drained == draining &&
				rs[1].Draining == draining && rs[1].Drained == draining
		}
	}
	rs := waitReplicas(t, a, want(false))
	require.Equal(t, "replica-a", rs[0].ID)
	require.Equal(t, "replica-b", rs[1].ID)

	require.NoError(t, a.SetControl(ctx, mailbox.ControlDrain, true, "operator 10.0.0.7"))
	wa.Drain(true) // the replica the request hit follows at once
	st, err := a.InstallationControls(ctx)
	require.NoError(t, err)
	rs = waitReplicas(t, b, func(rs []mailbox.Replica) bool { return len(rs) == 2 && rs[1].Draining })
	t.Logf("replica b recorded the drain %v after it was set through replica a (its poll: 0.5s)", rs[1].SeenAt.Sub(st.DrainedAt))
	require.True(t, wb.Draining(), "replica b drains: its /readyz answers 200 draining")
	waitReplicas(t, b, want(true))

	// A replica started during the drain claims nothing, not even before its first poll: a due
	// mailbox waits (these workers have no machine; a claim would end the test).
	_, err = a.Deliver(ctx, storetest.Event(1, "d1", "h1"))
	require.NoError(t, err)
	cctx, stopC := context.WithCancel(ctx)
	wc := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "replica-c", Count: 1}, a, nil, nil)
	cdone := make(chan struct{})
	go func() { wc.Run(cctx); close(cdone) }()
	waitReplicas(t, a, func(rs []mailbox.Replica) bool { return len(rs) == 3 && rs[2].Drained })
	stopC()
	<-cdone
	mb, err := a.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	require.Nil(t, mb.LeaseOwner, "nobody claimed the mailbox")
	require.NoError(t, a.PauseMailbox(ctx, mb.ID, "test")) // left alone once undrained

	require.NoError(t, a.SetControl(ctx, mailbox.ControlDrain, false, "operator 10.0.0.7"))
	wa.Drain(false)
	waitReplicas(t, b, want(false))
	require.False(t, wb.Draining(), "undrained: replica b claims again")
}

// waitReplicas reads the replica rows until ok accepts them (the rows are the signal: each
// replica writes its own each poll) and returns them.
func waitReplicas(t *testing.T, s *sqlstore.Store, ok func([]mailbox.Replica) bool) []mailbox.Replica {
	t.Helper()
	var rs []mailbox.Replica
	require.Eventually(t, func() bool {
		var err error
		rs, err = s.Replicas(context.Background(), time.Time{})
		return err == nil && ok(rs)
	}, time.Minute, 20*time.Millisecond, "the replicas never reached the expected records")
	return rs
}
