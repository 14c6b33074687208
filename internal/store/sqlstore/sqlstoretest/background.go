package sqlstoretest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// closedStayOut: a closed mailbox stays out of what only open mailboxes are in — the event
// and run workers' claims (even with a timer that has come), the queued runs, the orphan
// sweep's open mailboxes, reconciliation's due and tracked mailboxes — and out of the retention
// sweep's list once purged, until it changes again. The look-ups of a merge request's issue
// mailbox find open and closed mailboxes by number, branch and head commit.
func closedStayOut(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	runStates := mailbox.RunStates()
	mk := func(n int64, st mailbox.State, closedAt *time.Time) *mailbox.Mailbox {
		t.Helper()
		_, err := s.Deliver(ctx, storetest.Event(n, fmt.Sprintf("d%d", n), fmt.Sprintf("h%d", n)))
		require.NoError(t, err)
		mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n})
		require.NoError(t, err)
		evs, err := s.PendingEvents(ctx, mb.ID)
		require.NoError(t, err)
		ids := []int64{}
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		wake := c.Now().Add(-time.Minute)
		mb.State, mb.ClosedAt, mb.WakeAt = st, closedAt, &wake
		mb.Branch, mb.HeadSHA, mb.MRNumber = fmt.Sprintf("agent/issue-%d", n), fmt.Sprintf("%040d", n), 100+n
		require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: ids, Outcome: "done"}}))
		return mb
	}
	old := c.Now().Add(-40 * 24 * time.Hour)
	open := mk(1, mailbox.StateInDevelopment, nil)
	closed := mk(2, mailbox.StateDone, &old)
	purged := mk(3, mailbox.StateCancelled, &old)
	require.NoError(t, s.Purge(ctx, purged.ID))

	mb, err := s.LeaseEvents(ctx, "events", time.Minute, runStates)
	require.NoError(t, err)
	require.Nil(t, mb, "the closed mailboxes' timers do not make them due; the open one waits for its run")
	mb, err = s.LeaseRun(ctx, "runs", time.Minute, runStates, 2)
	require.NoError(t, err)
	require.NotNil(t, mb)
	require.Equal(t, open.ID, mb.ID)
	require.NoError(t, s.Release(ctx, mb.ID, "runs", 0))
	queued, err := s.QueuedRuns(ctx, runStates)
	require.NoError(t, err)
	require.Equal(t, []int64{open.ID}, queued)

	openSet, err := s.OpenMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int64]bool{open.ID: true}, openSet)
	due, err := s.ReconcileDue(ctx, "gl", 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, open.ID, due[0].ID)
	for _, mb := range []*mailbox.Mailbox{open, closed} {
		tracked, err := s.Tracked(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: mb.Number})
		require.NoError(t, err)
		require.Equal(t, mb == open, tracked, "mailbox %d", mb.Number)
	}
	repos, err := s.KnownRepos(ctx, "gl")
	require.NoError(t, err)
	require.Equal(t, []string{"acme/shop"}, repos)

	for _, mb := range []*mailbox.Mailbox{open, closed} {
		for _, by := range []struct {
			mr           int64
			branch, head string
		}{{mb.MRNumber, "", ""}, {0, mb.Branch, ""}, {0, "", mb.HeadSHA}} {
			id, err := s.FindIssueMailbox(ctx, "gl", "acme/shop", by.mr, by.branch, by.head)
			require.NoError(t, err)
			require.Equal(t, mb.ID, id, "mailbox %d by %+v", mb.Number, by)
		}
	}
	for _, by := range []struct {
		mr           int64
		branch, head string
	}{{0, "", ""}, {999, "agent/none", fmt.Sprintf("%040d", 9)}} {
		id, err := s.FindIssueMailbox(ctx, "gl", "acme/shop", by.mr, by.branch, by.head)
		require.NoError(t, err)
		require.Zero(t, id, "nothing matches %+v", by)
	}

	// Retention lists the closed mailbox not purged, not the purged one: until that one
	// changes again (an event processed on it), when it holds texts again.
	before := c.Now().Add(-30 * 24 * time.Hour)
	ids := func() []int64 {
		t.Helper()
		list, err := s.Purgeable(ctx, before)
		require.NoError(t, err)
		out := []int64{}
		for _, m := range list {
			out = append(out, m.ID)
		}
		return out
	}
	require.Equal(t, []int64{closed.ID}, ids())
	require.NoError(t, s.Purge(ctx, closed.ID))
	require.Empty(t, ids(), "purged: not listed again")
	c.Add(time.Second)
	_, err = s.Deliver(ctx, storetest.Event(purged.Number, "late", "late"))
	require.NoError(t, err)
	evs, err := s.PendingEvents(ctx, purged.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	again, err := s.Get(ctx, purged.ID)
	require.NoError(t, err)
	require.NoError(t, s.SaveProcessed(ctx, again, []mailbox.Processed{{IDs: []int64{evs[0].ID}, Outcome: "closed: ignored"}}))
	require.Equal(t, []int64{purged.ID}, ids(), "changed since its purge: listed again")
	require.NoError(t, s.Purge(ctx, purged.ID))
	require.Empty(t, ids())
	var events int
	require.NoError(t, s.DB().GetContext(ctx, &events, `SELECT count(*) FROM events WHERE mailbox_id = $1`, purged.ID))
	require.Zero(t, events, "the late event was purged")
}
