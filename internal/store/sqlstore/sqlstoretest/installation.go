package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
)

// installationControls: the drain and the pause are rows every replica reads; the pause stops
// every claim (plain, event, run) until it is lifted; replicas record themselves and are
// listed from a time on.
func installationControls(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	runStates := []string{string(mailbox.StateInDevelopment)}
	st, err := s.InstallationControls(ctx)
	require.NoError(t, err)
	require.Equal(t, mailbox.InstallationState{}, st, "no control is on at first")

	require.NoError(t, s.SetControl(ctx, mailbox.ControlDrain, true, "operator 10.0.0.7"))
	require.NoError(t, s.SetControl(ctx, mailbox.ControlDrain, true, "someone else"), "setting it again keeps the first setter")
	st, err = s.InstallationControls(ctx)
	require.NoError(t, err)
	require.True(t, st.Draining)
	require.Equal(t, "operator 10.0.0.7", st.DrainedBy)
	require.Equal(t, c.Now(), st.DrainedAt.UTC())
	require.False(t, st.Paused)
	require.NoError(t, s.SetControl(ctx, mailbox.ControlDrain, false, "operator 10.0.0.7"))
	st, err = s.InstallationControls(ctx)
	require.NoError(t, err)
	require.False(t, st.Draining)
	require.Error(t, s.SetControl(ctx, "halt", true, "x"), "an unknown control")

	id := deliverOn(t, s, 1)
	require.NoError(t, s.SetControl(ctx, mailbox.ControlPause, true, "operator 10.0.0.7"))
	got, err := s.Lease(ctx, "w1", time.Minute)
	require.NoError(t, err)
	require.Nil(t, got, "paused installation: no claim")
	got, err = s.LeaseEvents(ctx, "w1", time.Minute, runStates)
	require.NoError(t, err)
	require.Nil(t, got)
	got, err = s.LeaseRun(ctx, "w1", time.Minute, runStates, 0)
	require.NoError(t, err)
	require.Nil(t, got)
	st, err = s.InstallationControls(ctx)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, "operator 10.0.0.7", st.PausedBy)
	require.NoError(t, s.SetControl(ctx, mailbox.ControlPause, false, "operator 10.0.0.7"))
	got, err = s.Lease(ctx, "w1", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, got, "resumed: claimed again")
	require.Equal(t, id, got.ID)

	before := c.Now()
	require.NoError(t, s.RecordReplica(ctx, mailbox.Replica{ID: "old"}))
	c.Add(time.Hour)
	require.NoError(t, s.RecordReplica(ctx, mailbox.Replica{ID: "b", Draining: true}))
	require.NoError(t, s.RecordReplica(ctx, mailbox.Replica{ID: "a"}))
	require.NoError(t, s.RecordReplica(ctx, mailbox.Replica{ID: "b", Draining: true, Drained: true}))
	rs, err := s.Replicas(ctx, before.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, []mailbox.Replica{{ID: "a", SeenAt: c.Now()}, {ID: "b", SeenAt: c.Now(), Draining: true, Drained: true}},
		utcReplicas(rs), "the replicas seen since, by id, each as it last recorded itself")

	// A replica that stopped is forgotten a day after it was last seen, not before.
	rs, err = s.Replicas(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, rs, 3, "old, seen an hour ago, is still listed")
	c.Add(sqlstore.ReplicaForgotten - time.Hour)
	require.NoError(t, s.RecordReplica(ctx, mailbox.Replica{ID: "a"}))
	rs, err = s.Replicas(ctx, time.Time{})
	require.NoError(t, err)
	require.Len(t, rs, 3, "old, last seen exactly a day ago, is kept")
	c.Add(time.Second)
	require.NoError(t, s.RecordReplica(ctx, mailbox.Replica{ID: "a"}))
	rs, err = s.Replicas(ctx, time.Time{})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, replicaIDs(rs), "old, not seen for over a day, is forgotten")
}

// replicaRecordedOnChange: the workers record their replica at their first read of the
// controls, then only when its draining or drained changes or once their heartbeat has passed:
// the row's seen_at (the store's clock) moves only then.
func replicaRecordedOnChange(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	seen := func(id string) mailbox.Replica {
		t.Helper()
		rs, err := s.Replicas(ctx, time.Time{})
		require.NoError(t, err)
		for _, r := range utcReplicas(rs) {
			if r.ID == id {
				return r
			}
		}
		require.FailNow(t, "no replica "+id, "%v", rs)
		return mailbox.Replica{}
	}
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "r1", Count: 1, ReplicaHeartbeat: time.Hour}, s, nil, nil)
	require.NoError(t, w.SyncInstallation(ctx, s))
	first := c.Now()
	require.Equal(t, mailbox.Replica{ID: "r1", SeenAt: first}, seen("r1"), "recorded at the first read")
	c.Add(time.Minute)
	for range 3 {
		require.NoError(t, w.SyncInstallation(ctx, s))
	}
	require.Equal(t, first, seen("r1").SeenAt, "nothing changed within the heartbeat: not written again")

	require.NoError(t, s.SetControl(ctx, mailbox.ControlDrain, true, "operator 10.0.0.7"))
	require.NoError(t, w.SyncInstallation(ctx, s))
	require.Equal(t, mailbox.Replica{ID: "r1", SeenAt: c.Now(), Draining: true, Drained: true}, seen("r1"),
		"the drain is recorded at the read that sees it")
	c.Add(time.Minute)
	require.NoError(t, s.SetControl(ctx, mailbox.ControlDrain, false, "operator 10.0.0.7"))
	require.NoError(t, w.SyncInstallation(ctx, s))
	require.Equal(t, mailbox.Replica{ID: "r1", SeenAt: c.Now()}, seen("r1"), "and so is its end")

	beat := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "r2", Count: 1, ReplicaHeartbeat: time.Nanosecond}, s, nil, nil)
	require.NoError(t, beat.SyncInstallation(ctx, s))
	c.Add(time.Minute)
	require.NoError(t, beat.SyncInstallation(ctx, s))
	require.Equal(t, mailbox.Replica{ID: "r2", SeenAt: c.Now()}, seen("r2"), "once the heartbeat has passed, written again unchanged")
}

func replicaIDs(rs []mailbox.Replica) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func utcReplicas(rs []mailbox.Replica) []mailbox.Replica {
	for i := range rs {
		rs[i].SeenAt = rs[i].SeenAt.UTC()
	}
	return rs
}

// rerunTold: StartRun tells a rerun of a decision (mailbox, phase, step) — one whose earlier
// run is still recorded running, or collected by recovery and never applied — and no other.
func rerunTold(t *testing.T, s *sqlstore.Store, _ *storetest.Clock) {
	ctx := context.Background()
	mb, first := mailboxWithRun(t, s, 1)
	require.False(t, first.Rerun, "the first run of a decision")
	start := func(phase string) *mailbox.Run {
		r := &mailbox.Run{MailboxID: mb.ID, Phase: phase}
		require.NoError(t, s.StartRun(ctx, r))
		return r
	}
	other := start("functional_analysis")
	require.False(t, other.Rerun, "another phase is another decision")
	second := start("development")
	require.True(t, second.Rerun, "the first is still recorded running")
	for _, r := range []*mailbox.Run{first, second, other} {
		r.Status = mailbox.RunSucceeded
		require.NoError(t, s.FinishRun(ctx, r))
	}
	third := start("development")
	require.False(t, third.Rerun, "earlier runs ended and were acted on: a new decision (a retry, a review's changes)")

	third.Status, third.Applied = mailbox.RunSucceeded, false
	finished, err := s.FinishRecoveredRun(ctx, third)
	require.NoError(t, err)
	require.True(t, finished)
	fourth := start("development")
	require.True(t, fourth.Rerun, "the collected result was never applied")
	fourth.Status = mailbox.RunSucceeded
	require.NoError(t, s.FinishRun(ctx, fourth))
	got, err := s.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.NoError(t, s.SaveApplied(ctx, got, third.ID))
	require.False(t, start("development").Rerun, "applied: nothing is run twice")
}
