package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// seedClosed makes mailbox n with an event, a finished run with output and result, an
// answered question with context and a session record, closed at closedAt (nil: open).
func seedClosed(t *testing.T, s *sqlstore.Store, n int64, closedAt *time.Time) *mailbox.Mailbox {
	t.Helper()
	ctx := context.Background()
	_, err := s.Deliver(ctx, storetest.Event(n, "d"+string(rune('a'+n)), "h"+string(rune('a'+n))))
	require.NoError(t, err)
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n})
	require.NoError(t, err)
	run := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, run))
	code := 0
	run.Status, run.Outcome, run.ExitCode = mailbox.RunSucceeded, "ok", &code
	run.Output, run.Result = "the agent's log, with the issue's text", `{"summary":"done"}`
	require.NoError(t, s.FinishRun(ctx, run))
	require.NoError(t, s.InsertQuestions(ctx, []mailbox.Question{{MailboxID: mb.ID, Round: 1, QID: "q1",
		Title: "Which separator?", Context: "quoted from the issue", OptionsJSON: `[]`, Default: "a",
		DeadlineAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}}))
	qs, err := s.Questions(ctx, mb.ID, 1)
	require.NoError(t, err)
	require.NoError(t, s.AnswerQuestion(ctx, qs[0].ID, "b", "alice", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)))
	id := run.ID
	require.NoError(t, s.RecordSession(ctx, &phase.SessionRecord{MailboxID: mb.ID, RunID: &id, Adapter: "claude",
		Name: "agent/issue", TokensIn: 100, TokensOut: 10, CostUSD: 0.02, ReportedCost: 0.02, Succeeded: true}))
	_, err = s.RecordShadow(ctx, mailbox.ShadowWrite{Target: mb.Ref(), Kind: mailbox.ShadowComment, Body: "the text shadow mode kept"})
	require.NoError(t, err)
	if closedAt != nil {
		evs, err := s.PendingEvents(ctx, mb.ID)
		require.NoError(t, err)
		mb.State, mb.ClosedAt = mailbox.StateDone, closedAt
		require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: []int64{evs[0].ID}, Outcome: "done"}}))
	}
	return mb
}

// retention: retention_days purges the events, run logs and outputs and question contexts of mailboxes
// closed longer ago, and keeps the mailbox, the runs' phases, times and outcomes, the answers
// and the session records; younger closed mailboxes and open ones are untouched. An event not
// applied yet (the bot assigned again to a done issue while its project is paused or the
// workers are busy) is never purged: it would start the issue again.
func retention(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	db := s.DB()
	now := c.Now()
	old, young := now.Add(-31*24*time.Hour), now.Add(-10*24*time.Hour)
	purged := seedClosed(t, s, 1, &old)
	kept := seedClosed(t, s, 2, &young)
	open := seedClosed(t, s, 3, nil)
	reassigned := seedClosed(t, s, 4, &old)
	require.NoError(t, s.PauseProject(ctx, "gl", "acme/shop", "ops"))
	again := storetest.Event(4, "reassign", "reassign")
	again.Type, again.Comment, again.Assignees = forge.EventAssignees, nil, []string{"alfred"}
	_, err := s.Deliver(ctx, again)
	require.NoError(t, err)

	r := &mailbox.Retention{Store: s, Days: func(string) int { return 30 }, Now: c.Now}
	n, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = r.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to purge: idempotent")

	count := func(q string, id int64) int {
		var c int
		require.NoError(t, db.GetContext(ctx, &c, q, id))
		return c
	}
	for _, c := range []struct {
		mb     *mailbox.Mailbox
		events int
		texts  int
		states int // the state changes: closed (idle → done) or not
	}{{purged, 0, 0, 1}, {kept, 1, 1, 1}, {open, 1, 1, 0}, {reassigned, 1, 0, 1}} {
		id := c.mb.ID
		require.Equal(t, c.events, count(`SELECT count(*) FROM events WHERE mailbox_id = $1`, id), "events of %d", id)
		if c.mb == reassigned {
			require.Equal(t, 1, count(`SELECT count(*) FROM events WHERE mailbox_id = $1 AND processed_at IS NULL`, id),
				"the delivery not applied yet is kept")
		}
		require.Equal(t, c.texts, count(`SELECT count(*) FROM runs WHERE mailbox_id = $1 AND output <> '' AND result <> ''`, id))
		require.Equal(t, c.texts, count(`SELECT count(*) FROM questions WHERE mailbox_id = $1 AND context <> ''`, id))
		require.Equal(t, c.texts, count(`SELECT count(*) FROM shadow_writes WHERE mailbox_id = $1`, id), "shadow writes of %d", id)
		// Kept everywhere: the mailbox, its state changes, the run's phase, times and outcome,
		// the answer, the session.
		require.Equal(t, c.states, count(`SELECT count(*) FROM state_changes WHERE mailbox_id = $1 AND to_state = 'done'`, id),
			"state changes of %d", id)
		require.Equal(t, 1, count(`SELECT count(*) FROM mailboxes WHERE id = $1`, id))
		require.Equal(t, 1, count(`SELECT count(*) FROM runs WHERE mailbox_id = $1 AND phase = 'development'
			AND status = 'succeeded' AND outcome = 'ok' AND finished_at IS NOT NULL`, id))
		require.Equal(t, 1, count(`SELECT count(*) FROM questions WHERE mailbox_id = $1 AND answer = 'b' AND answered_by = 'alice'`, id))
		require.Equal(t, 1, count(`SELECT count(*) FROM llm_sessions WHERE mailbox_id = $1 AND tokens_in = 100 AND cost_usd = 0.02`, id))
	}
	usage, err := s.Usage(ctx, purged.ID)
	require.NoError(t, err)
	require.Equal(t, []mailbox.ProgressRun{{Phase: "development", Duration: 0, TokensIn: 100, TokensOut: 10, CostUSD: 0.02, Rated: true}}, usage,
		"the cost of a purged issue is still known")

	// A project with no retention keeps everything.
	require.NoError(t, s.Purge(ctx, kept.ID)) // Purge itself does not look at the days
	n, err = (&mailbox.Retention{Store: s, Days: func(string) int { return 0 }, Now: r.Now}).Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, s.Purge(ctx, open.ID))
	require.Equal(t, 1, count(`SELECT count(*) FROM events WHERE mailbox_id = $1`, open.ID), "an open mailbox is never purged")
}
