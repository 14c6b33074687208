package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

// webReader: what the pages read — a finished run with its session, a running run whose
// container only its executor record names yet, the last event, the cost so far — and the
// gauges and usage of the same mailbox.
func webReader(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	mb, first := mailboxWithRun(t, s, 1)
	c.Add(42 * time.Second)
	code := 0
	first.Status, first.Outcome, first.ExitCode, first.Container, first.Output = mailbox.RunSucceeded, "ok", &code, "c-1", "analysed"
	require.NoError(t, s.FinishRun(ctx, first))
	id := first.ID
	require.NoError(t, s.RecordSession(ctx, &phase.SessionRecord{MailboxID: mb.ID, RunID: &id, Adapter: "claude",
		Name: "agent/issue-1", NativeID: "native-1", TokensIn: 120, TokensOut: 9, CostUSD: 0.0005, ReportedCost: 0.0005, Succeeded: true}))
	second := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, second))
	require.NoError(t, s.InsertContainer(ctx, &runner.ContainerRecord{RunID: second.ID, MailboxID: mb.ID,
		ContainerName: "alfred-mbx1-r2-development-a2", Adapter: "script"}))

	list, err := s.Mailboxes(ctx, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "acme/shop", list[0].Repo)
	require.True(t, list[0].Running)
	require.Equal(t, "development", list[0].Phase)
	require.InDelta(t, 0.0005, list[0].CostUSD, 1e-9)
	require.NotEmpty(t, list[0].LastEvent)
	require.False(t, list[0].LastEventAt.IsZero())

	d, err := s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, d.Runs, 2)
	require.Equal(t, 42*time.Second, d.Runs[0].Duration(c.Now()))
	require.NotNil(t, d.Runs[0].Session)
	require.Equal(t, "native-1", d.Runs[0].Session.NativeID)
	require.True(t, d.Runs[0].Session.Rated)
	require.True(t, d.Runs[1].Running())
	require.Equal(t, "alfred-mbx1-r2-development-a2", d.Runs[1].Container, "the executor record names the running container")
	require.NotEmpty(t, d.Timeline)

	r, err := s.Run(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, "analysed", r.Output)
	require.Equal(t, int64(1), r.Number)
	_, err = s.Run(ctx, 999)
	require.Error(t, err)

	g, err := s.Gauges(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, g.RunsRunning)
	require.Equal(t, 1, g.EventsUnprocessed, "the mailbox's event is not processed")
	require.Equal(t, 42*time.Second, g.OldestUnprocessed, "received 42 s ago at the store's clock")
	usage, err := s.Usage(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, usage, 1, "finished runs only")
	require.Equal(t, 42*time.Second, usage[0].Duration)
}
