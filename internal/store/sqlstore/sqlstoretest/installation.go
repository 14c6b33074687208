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
}

func utcReplicas(rs []mailbox.Replica) []mailbox.Replica {
	for i := range rs {
		rs[i].SeenAt = rs[i].SeenAt.UTC()
	}
	return rs
}
