package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
)

func commentsApplyOnce(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	a, b := deliverOn(t, s, 1), deliverOn(t, s, 2)
	mine, err := s.ApplyComment(ctx, a.ID, 42, 7)
	require.NoError(t, err)
	require.True(t, mine)
	mine, err = s.ApplyComment(ctx, a.ID, 42, 7)
	require.NoError(t, err)
	require.True(t, mine, "a retry of the same event may still act")
	mine, err = s.ApplyComment(ctx, a.ID, 42, 8)
	require.NoError(t, err)
	require.False(t, mine, "a comment seen as a delivery and by reconciliation acts once")
	mine, err = s.ApplyComment(ctx, b.ID, 42, 9)
	require.NoError(t, err)
	require.True(t, mine, "per mailbox")
}

func reconcileDueOldestFirst(t *testing.T, s Store, c *Clock) {
	ctx := context.Background()
	var ids []int64
	for n := int64(1); n <= 3; n++ {
		mb := deliverOn(t, s, n)
		mb.State = mailbox.StateWaitingInfo
		require.NoError(t, s.Save(ctx, mb))
		ids = append(ids, mb.ID)
	}
	idle := deliverOn(t, s, 4)
	done := deliverOn(t, s, 5)
	done.State = mailbox.StateDone
	require.NoError(t, s.Save(ctx, done))

	seen := c.Now().Add(-time.Hour)
	require.NoError(t, s.SaveReconciled(ctx, ids[0], mailbox.Reconciled{IssueUpdatedAt: &seen}))
	c.Add(time.Second)
	require.NoError(t, s.SaveReconciled(ctx, ids[1], mailbox.Reconciled{}))

	due, err := s.ReconcileDue(ctx, "gl", 10)
	require.NoError(t, err)
	var got []int64
	for _, m := range due {
		got = append(got, m.ID)
	}
	require.Equal(t, []int64{ids[2], ids[0], ids[1]}, got, "never reconciled first, then oldest; only working mailboxes")
	require.NotNil(t, due[1].ReconciledAt)
	require.True(t, due[1].IssueUpdatedAt.Equal(seen))

	limited, err := s.ReconcileDue(ctx, "gl", 1)
	require.NoError(t, err)
	require.Len(t, limited, 1)
	none, err := s.ReconcileDue(ctx, "other", 10)
	require.NoError(t, err)
	require.Empty(t, none)

	mb, err := s.Get(ctx, ids[0])
	require.NoError(t, err)
	mb.Title = "saved by a pass"
	require.NoError(t, s.Save(ctx, mb))
	mb, err = s.Get(ctx, ids[0])
	require.NoError(t, err)
	require.True(t, mb.IssueUpdatedAt.Equal(seen), "Save leaves the reconciliation alone")

	for n, want := range map[int64]bool{1: true, 4: false, 5: false, 9: false} {
		ok, err := s.Tracked(ctx, issue(n))
		require.NoError(t, err)
		require.Equal(t, want, ok, "issue %d", n)
	}
	_, _ = idle, done
	repos, err := s.KnownRepos(ctx, "gl")
	require.NoError(t, err)
	require.Equal(t, []string{"acme/shop"}, repos)
	repos, err = s.KnownRepos(ctx, "other")
	require.NoError(t, err)
	require.Empty(t, repos)
}

func failedEventsSetAside(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	mb := deliverOn(t, s, 1)
	_, err := s.Deliver(ctx, Event(1, "second", "h2"))
	require.NoError(t, err)
	evs, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	for range 2 {
		n, err := s.FailEvents(ctx, []int64{evs[0].ID}, "pq: invalid byte sequence", 3)
		require.NoError(t, err)
		require.Zero(t, n)
	}
	pending, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, pending, 2, "below the limit the event stays pending")
	n, err := s.FailEvents(ctx, []int64{evs[0].ID}, "pq: invalid byte sequence", 3)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	pending, err = s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1, "set aside, the inbox goes on with the rest")
	require.Equal(t, evs[1].ID, pending[0].ID)
}

func leaseAttemptsCount(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	mb := deliverOn(t, s, 1)
	got, err := s.Claim(ctx, mb.ID, "a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, got.LeaseAttempts)
	// The holder dies: its lease expires, another process claims again.
	got, err = s.Claim(ctx, mb.ID, "b", time.Minute)
	require.NoError(t, err)
	require.Nil(t, got, "held")
	require.NoError(t, s.Release(ctx, mb.ID, "a", -time.Second))
	got, err = s.Claim(ctx, mb.ID, "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, got.LeaseAttempts, "a released lease resets the count")
	c := got
	require.NoError(t, s.Extend(ctx, c.ID, "b", -time.Second)) // expires at once, as a killed holder's
	leased, err := s.Lease(ctx, "c", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, leased)
	require.Equal(t, 2, leased.LeaseAttempts, "a claim after a holder that never released counts")
}

func runQueue(t *testing.T, s Store, c *Clock) {
	ctx := context.Background()
	runStates := []string{string(mailbox.StateFunctionalAnalysis), string(mailbox.StateInDevelopment)}
	mk := func(n int64, state mailbox.State, repoSuffix string, wakeAgo time.Duration) *mailbox.Mailbox {
		ev := Event(n, fmt.Sprintf("rq%d", n), fmt.Sprintf("rqh%d", n))
		ev.Target.Repo += repoSuffix
		_, err := s.Deliver(ctx, ev)
		require.NoError(t, err)
		mb, err := s.Find(ctx, ev.Target)
		require.NoError(t, err)
		evs, err := s.PendingEvents(ctx, mb.ID)
		require.NoError(t, err)
		wake := c.Now().Add(-wakeAgo)
		mb.State, mb.WakeAt = state, &wake
		require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: []int64{evs[0].ID}, Outcome: "test"}}))
		return mb
	}
	run1 := mk(1, mailbox.StateInDevelopment, "", 3*time.Minute)
	run2 := mk(2, mailbox.StateFunctionalAnalysis, "", 2*time.Minute)
	other := mk(3, mailbox.StateFunctionalAnalysis, "-other", time.Minute)
	timer := mk(4, mailbox.StateInCI, "", time.Minute)

	queued, err := s.QueuedRuns(ctx, runStates)
	require.NoError(t, err)
	require.Equal(t, []int64{run1.ID, run2.ID, other.ID}, queued, "in the order they became due")

	ev, err := s.LeaseEvents(ctx, "events", time.Minute, runStates)
	require.NoError(t, err)
	require.NotNil(t, ev)
	require.Equal(t, timer.ID, ev.ID, "an event worker leaves the runs to the run workers")
	none, err := s.LeaseEvents(ctx, "events", time.Minute, runStates)
	require.NoError(t, err)
	require.Nil(t, none)

	got, err := s.LeaseRun(ctx, "run-a", time.Minute, runStates, 1)
	require.NoError(t, err)
	require.Equal(t, run1.ID, got.ID, "longest waiting first")
	got, err = s.LeaseRun(ctx, "run-b", time.Minute, runStates, 1)
	require.NoError(t, err)
	require.Equal(t, other.ID, got.ID, "one run per project: acme/shop is at its limit")
	got, err = s.LeaseRun(ctx, "run-c", time.Minute, runStates, 1)
	require.NoError(t, err)
	require.Nil(t, got)
	require.NoError(t, s.Release(ctx, run1.ID, "run-a", 0))
	got, err = s.LeaseRun(ctx, "run-c", time.Minute, runStates, 1)
	require.NoError(t, err)
	require.Equal(t, run2.ID, got.ID)
}
