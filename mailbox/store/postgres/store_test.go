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
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/store/postgres"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, now func() time.Time) storetest.Store {
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

func TestStoreExecutorLifecycle(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	s := postgres.New(db, nil)
	ctx := context.Background()
	_, err := s.Deliver(ctx, storetest.Event(1, "d1", "h1"))
	require.NoError(t, err)
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	run := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, run))

	rec := &runner.ContainerRecord{RunID: run.ID, MailboxID: mb.ID, ContainerName: "alfred-mbx1-r1-development-a1",
		Adapter: "script", WorkspacePath: "/data/worktrees/x", Branch: "agent/issue-1"}
	require.NoError(t, s.InsertExecutor(ctx, rec))
	require.NotZero(t, rec.ID)
	require.Equal(t, runner.ContainerStarting, rec.Status)
	require.Equal(t, "docker", rec.Runtime)
	dup := *rec
	require.ErrorIs(t, s.InsertExecutor(ctx, &dup), runner.ErrNameConflict, "one row per container name")

	require.NoError(t, s.ExecutorReady(ctx, rec.ID, "abc123"))
	require.NoError(t, s.ExecutorSeen(ctx, rec.ID))
	live, err := s.LiveExecutors(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.Equal(t, runner.ContainerReady, live[0].Status)
	require.Equal(t, "abc123", live[0].ContainerID)
	require.Equal(t, "script", live[0].Adapter)
	ids, err := s.UnfinishedMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{mb.ID}, ids)
	withLive, err := s.LiveExecutorMailboxes(ctx)
	require.NoError(t, err)
	require.True(t, withLive[mb.ID])

	require.Error(t, s.EndExecutor(ctx, rec.ID, runner.ContainerReady, ""), "ready is not a final status")
	require.NoError(t, s.EndExecutor(ctx, rec.ID, runner.ContainerStopped, "succeeded, exit 0"))
	live, err = s.LiveExecutors(ctx)
	require.NoError(t, err)
	require.Empty(t, live)
	all, err := s.RunExecutors(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, runner.ContainerStopped, all[0].Status)
	require.Equal(t, "succeeded, exit 0", all[0].ErrorMessage)

	// A run finished by recovery is unapplied until the machine acts on it.
	running, err := s.RunningRuns(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, running, 1)
	r := running[0]
	r.Status, r.Outcome, r.Result, r.HeadSHA, r.Applied = mailbox.RunSucceeded, "ok", `{"summary":"x"}`, "abc", false
	changed, err := s.FinishRecoveredRun(ctx, &r)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = s.FinishRecoveredRun(ctx, &r)
	require.NoError(t, err)
	require.False(t, changed, "only a running run is finished")
	un, err := s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.NotNil(t, un)
	require.Equal(t, "abc", un.HeadSHA)
	require.NoError(t, s.SaveApplied(ctx, mb, un.ID))
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.Nil(t, un)
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
