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

// pausedNotClaimed: a paused mailbox keeps receiving events, no claim (event, run, plain)
// takes it, and once resumed it is claimed and its events come in arrival order, each once.
func pausedNotClaimed(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	runStates := []string{string(mailbox.StateInDevelopment)}
	mb, run := mailboxWithRun(t, s, 1)
	require.NoError(t, s.FinishRun(ctx, &mailbox.Run{ID: run.ID, MailboxID: mb.ID, Status: mailbox.RunSucceeded}))
	require.NoError(t, s.PauseMailbox(ctx, mb.ID, "operator 127.0.0.1"))
	for i := range 3 {
		_, err := s.Deliver(ctx, storetest.Event(1, fmt.Sprintf("p%d", i), fmt.Sprintf("ph%d", i)))
		require.NoError(t, err)
	}
	// Due by its timer in a run state too: the run workers' claim skips it as well.
	now := c.Now()
	mb, err := s.Get(ctx, mb.ID)
	require.NoError(t, err)
	mb.State, mb.WakeAt = mailbox.StateInDevelopment, &now
	require.NoError(t, s.Save(ctx, mb))

	got, err := s.LeaseEvents(ctx, "w1", time.Minute, runStates)
	require.NoError(t, err)
	require.Nil(t, got, "a paused mailbox is not claimed by the event workers")
	got, err = s.LeaseRun(ctx, "w1", time.Minute, runStates, 0)
	require.NoError(t, err)
	require.Nil(t, got, "nor by the run workers")
	got, err = s.Lease(ctx, "w1", time.Minute)
	require.NoError(t, err)
	require.Nil(t, got)
	queued, err := s.QueuedRuns(ctx, runStates)
	require.NoError(t, err)
	require.Empty(t, queued)

	other := deliverOn(t, s, 2) // another mailbox is claimed meanwhile
	got, err = s.LeaseEvents(ctx, "w1", time.Minute, runStates)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Equal(t, other, got.ID)

	pending, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, pending, 4, "every event delivered while paused is stored")

	d, err := s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	require.True(t, d.Paused)
	require.Equal(t, "operator 127.0.0.1", d.PausedBy)

	require.NoError(t, s.ResumeMailbox(ctx, mb.ID, "operator 127.0.0.1"))
	got, err = s.LeaseEvents(ctx, "w2", time.Minute, runStates)
	require.NoError(t, err)
	require.NotNil(t, got, "resumed: claimed again")
	require.Equal(t, mb.ID, got.ID)
	pending, err = s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, pending, 4)
	for i := 1; i < len(pending); i++ {
		require.Less(t, pending[i-1].ID, pending[i].ID, "in arrival order")
	}
	for _, e := range pending {
		require.NoError(t, s.MarkProcessed(ctx, e.ID, "applied"))
	}
	pending, err = s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Empty(t, pending, "each applied once")

	d, err = s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	require.False(t, d.Paused)
	var ops []string
	for _, e := range d.Timeline {
		if e.Kind == "operator" {
			ops = append(ops, e.Text)
		}
	}
	require.Equal(t, []string{"operator 127.0.0.1 paused the mailbox", "operator 127.0.0.1 resumed the mailbox"}, ops)

	require.ErrorIs(t, s.PauseMailbox(ctx, 999, "x"), mailbox.ErrNotFound)
}

// pausedProject: no mailbox of a paused project is claimed, one created while it is paused
// included; another project's are; resuming the project frees them.
func pausedProject(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	first := deliverOn(t, s, 1)
	require.NoError(t, s.PauseProject(ctx, "gl", "acme/shop", "operator 10.0.0.7"))
	second := deliverOn(t, s, 2) // created while the project is paused
	got, err := s.Lease(ctx, "w1", time.Minute)
	require.NoError(t, err)
	require.Nil(t, got, "no mailbox of a paused project is claimed")

	ev := storetest.Event(5, "o1", "oh1")
	ev.Target.Repo = "acme/other"
	_, err = s.Deliver(ctx, ev)
	require.NoError(t, err)
	got, err = s.Lease(ctx, "w1", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Equal(t, "acme/other", got.Repo)

	d, err := s.Mailbox(ctx, second)
	require.NoError(t, err)
	require.True(t, d.ProjectPaused)

	require.NoError(t, s.ResumeProject(ctx, "gl", "acme/shop", "operator 10.0.0.7"))
	claimed := map[int64]bool{}
	for range 2 {
		got, err := s.Lease(ctx, "w2", time.Minute)
		require.NoError(t, err)
		require.NotNil(t, got)
		claimed[got.ID] = true
	}
	require.Equal(t, map[int64]bool{first: true, second: true}, claimed)
	d, err = s.Mailbox(ctx, first)
	require.NoError(t, err)
	require.False(t, d.ProjectPaused)
	var ops []string
	for _, e := range d.Timeline {
		if e.Kind == "operator" {
			ops = append(ops, e.Text)
		}
	}
	require.Equal(t, []string{"operator 10.0.0.7 paused the project", "operator 10.0.0.7 resumed the project"}, ops)
}

// cancelRequest: a cancel request is recorded on a running run only, read back by the
// running phase, and in the mailbox's timeline.
func cancelRequest(t *testing.T, s *sqlstore.Store, _ *storetest.Clock) {
	ctx := context.Background()
	mb, run := mailboxWithRun(t, s, 1)
	by, err := s.CancelRequested(ctx, run.ID)
	require.NoError(t, err)
	require.Empty(t, by)
	require.NoError(t, s.RequestCancel(ctx, run.ID, "operator 127.0.0.1"))
	by, err = s.CancelRequested(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, "operator 127.0.0.1", by)
	d, err := s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, "operator", d.Timeline[len(d.Timeline)-1].Kind)
	require.Equal(t, fmt.Sprintf("operator 127.0.0.1 cancelled run %d", run.ID), d.Timeline[len(d.Timeline)-1].Text)

	run.Status = mailbox.RunInterrupted
	require.NoError(t, s.FinishRun(ctx, run))
	require.ErrorIs(t, s.RequestCancel(ctx, run.ID, "x"), mailbox.ErrNotFound, "a finished run is not cancelled")
	require.ErrorIs(t, s.RequestCancel(ctx, 999, "x"), mailbox.ErrNotFound)
}

// deliverOn delivers a fresh event to issue n of acme/shop and returns its mailbox's id.
func deliverOn(t *testing.T, s *sqlstore.Store, n int64) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := s.Deliver(ctx, storetest.Event(n, fmt.Sprintf("d%d", n), fmt.Sprintf("h%d", n)))
	require.NoError(t, err)
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n})
	require.NoError(t, err)
	return mb.ID
}
