package sqlstoretest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
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

	list, err := s.Mailboxes(ctx, 0, 10)
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

// unratedRuns: a run whose adapter reported no cost, and a run that ran an agent without a
// session record (sessions off, a merge-request mailbox, an adapter without sessions), are
// unrated in the mailbox list, on the mailbox page and in the usage of the status comment and
// the budget — never a cost of 0. A run that ran no agent (no container) costs nothing and is
// not unrated; a running run is not counted yet.
func unratedRuns(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	mb, rated := mailboxWithRun(t, s, 1)
	finish := func(r *mailbox.Run, container string) {
		t.Helper()
		c.Add(10 * time.Second)
		code := 0
		r.Status, r.Outcome, r.ExitCode, r.Container = mailbox.RunSucceeded, "ok", &code, container
		require.NoError(t, s.FinishRun(ctx, r))
	}
	start := func(m *mailbox.Mailbox, p string) *mailbox.Run {
		t.Helper()
		r := &mailbox.Run{MailboxID: m.ID, Phase: p}
		require.NoError(t, s.StartRun(ctx, r))
		return r
	}
	record := func(r *mailbox.Run, adapter string, cost float64) {
		t.Helper()
		id := r.ID
		require.NoError(t, s.RecordSession(ctx, &phase.SessionRecord{MailboxID: r.MailboxID, RunID: &id, Adapter: adapter,
			Name: "agent/issue-1", NativeID: "n", TokensIn: 10, TokensOut: 2, CostUSD: cost, ReportedCost: cost, Succeeded: true}))
	}
	finish(rated, "c-1")
	record(rated, "claude", 0.42)
	noCost := start(mb, "development") // codex: a session record without a cost
	finish(noCost, "c-2")
	record(noCost, "codex", 0)
	noSession := start(mb, "ci_fix") // sessions off: no record at all
	finish(noSession, "c-3")
	noAgent := start(mb, "conflict_resolution") // the target merged cleanly: no container
	finish(noAgent, "")
	start(mb, "development") // running

	other, onlyRun := mailboxWithRun(t, s, 2)
	finish(onlyRun, "c-4")

	list, err := s.Mailboxes(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 2)
	byID := map[int64]int{}
	for i, m := range list {
		byID[m.ID] = i
	}
	first, second := list[byID[mb.ID]], list[byID[other.ID]]
	require.InDelta(t, 0.42, first.CostUSD, 1e-9)
	require.Equal(t, 2, first.Unrated, "the run without a cost and the run without a session record")
	require.Zero(t, second.CostUSD)
	require.Equal(t, 1, second.Unrated, "a mailbox whose only run has no session record is unrated, not free")

	d, err := s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, 2, d.Unrated)
	require.Len(t, d.Runs, 5)
	require.True(t, d.Runs[0].Session.Rated)
	require.False(t, d.Runs[1].Session.Rated)
	require.Nil(t, d.Runs[2].Session, "no session record")
	require.Equal(t, "c-3", d.Runs[2].Container)
	require.Nil(t, d.Runs[3].Session)
	require.Empty(t, d.Runs[3].Container, "no agent ran")

	usage, err := s.Usage(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, usage, 4, "finished runs only")
	require.Equal(t, []bool{true, false, false, true}, []bool{usage[0].Rated, usage[1].Rated, usage[2].Rated, usage[3].Rated},
		"rated, no cost reported, no session record, no agent (nothing to rate)")
	require.Zero(t, usage[3].CostUSD)
	spent, unrated := mailbox.Progress{Runs: usage}.Spent()
	require.InDelta(t, 0.42, spent, 1e-9)
	require.Equal(t, 2, unrated, "the status comment and the budget count the same unrated runs as the pages")
}

// webReaderPages: the mailbox list read page by page is the whole list cut in order, each
// mailbox once, the newest activity first; a page past the end is empty.
func webReaderPages(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	const n = 7
	for i := int64(1); i <= n; i++ {
		_, err := s.Deliver(ctx, storetest.Event(i, fmt.Sprintf("page-%d", i), "h"))
		require.NoError(t, err)
		c.Add(time.Second)
	}
	all, err := s.Mailboxes(ctx, 0, 100)
	require.NoError(t, err)
	require.Len(t, all, n)
	for i, m := range all {
		require.EqualValues(t, n-i, m.Number, "newest activity first")
	}
	var paged []web.MailboxSummary
	for offset := 0; ; offset += 3 {
		page, err := s.Mailboxes(ctx, offset, 3)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 3)
		paged = append(paged, page...)
	}
	require.Equal(t, all, paged)
	none, err := s.Mailboxes(ctx, n, 3)
	require.NoError(t, err)
	require.Empty(t, none)
}

// stateTimeline: each change of a mailbox's state is on its page's timeline at the store's
// clock, in order, whichever save makes it (Save, SaveProcessed); a save that keeps the state
// adds nothing; at the instant of a decision, the state change comes after it and before the
// run it starts.
func stateTimeline(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	_, err := s.Deliver(ctx, storetest.Event(1, "d", "h"))
	require.NoError(t, err)
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	require.Equal(t, mailbox.StateIdle, mb.State)
	start := c.Now()

	c.Add(time.Second)
	pending, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	mb.State = mailbox.StateInDevelopment
	c.Tick(time.Microsecond) // the decision and the state change it made are at one instant
	require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: []int64{pending[0].ID}, Outcome: "plan validated"}}))
	c.Tick(0)
	run := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, run))
	c.Add(time.Second)
	mb.State = mailbox.StateInCI
	require.NoError(t, s.Save(ctx, mb))
	c.Add(time.Second)
	mb.Title = "renamed"
	require.NoError(t, s.Save(ctx, mb))
	c.Add(time.Second)
	mb.State = mailbox.StateDone
	require.NoError(t, s.Save(ctx, mb))

	d, err := s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	var got []string
	for _, e := range d.Timeline {
		got = append(got, fmt.Sprintf("+%s %s %s", e.At.Sub(start).Truncate(time.Second), e.Kind, e.Text))
	}
	require.Equal(t, []string{
		"+0s event issue_edited by alice",
		"+1s decision plan validated",
		"+1s state idle → in_development",
		fmt.Sprintf("+1s run run %d: development started (attempt 1)", run.ID),
		"+2s state in_development → in_ci",
		"+4s state in_ci → done",
	}, got)
}

// rebuiltTimeline: a mailbox rebuilt from the forge starts its timeline in its rebuilt state,
// with no change from idle that never happened; an idle mailbox a delivery made during the
// rebuild, taken over, did change from idle, and its timeline says so.
func rebuiltTimeline(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	now := c.Now()
	states := func(id int64) []string {
		d, err := s.Mailbox(ctx, id)
		require.NoError(t, err)
		var got []string
		for _, e := range d.Timeline {
			if e.Kind == "state" {
				got = append(got, e.Text)
			}
		}
		return got
	}
	fresh := &mailbox.Rebuilt{Mailbox: mailbox.Mailbox{Forge: "gl", Repo: "acme/shop", Number: 7, State: mailbox.StateInReview,
		Branch: "agent/issue-7", MRNumber: 70, WakeAt: &now}}
	created, err := s.Rebuild(ctx, fresh)
	require.NoError(t, err)
	require.True(t, created)
	require.Empty(t, states(fresh.Mailbox.ID), "a new rebuilt mailbox changed no state")

	_, err = s.Deliver(ctx, storetest.Event(8, "during-rebuild", "x"))
	require.NoError(t, err)
	takenOver := &mailbox.Rebuilt{Mailbox: mailbox.Mailbox{Forge: "gl", Repo: "acme/shop", Number: 8, State: mailbox.StateInCI,
		Branch: "agent/issue-8", MRNumber: 80, WakeAt: &now}}
	created, err = s.Rebuild(ctx, takenOver)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, []string{"idle → in_ci"}, states(takenOver.Mailbox.ID))
}

// mailboxPageBounded: a mailbox that received more events than a page shows (anyone who may
// comment can send thousands) is read with its latest web.MaxTimelineEvents events only, and
// says so; the newest are there.
func mailboxPageBounded(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	const extra = 5
	for i := range web.MaxTimelineEvents + extra {
		_, err := s.Deliver(ctx, storetest.Event(1, fmt.Sprintf("flood-%d", i), fmt.Sprintf("h-%d", i)))
		require.NoError(t, err)
		c.Add(time.Millisecond)
	}
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	d, err := s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	events := 0
	for _, e := range d.Timeline {
		if e.Kind == "event" {
			events++
		}
	}
	require.Equal(t, web.MaxTimelineEvents, events)
	require.True(t, d.TimelineCut, "the page says older events are not shown")
	last := d.Timeline[len(d.Timeline)-1]
	require.Equal(t, c.Now().Add(-time.Millisecond).UTC(), last.At.UTC(), "the newest event is shown")
}

// shadowPageBounded: the mailbox page reads the latest web.MaxTimelineEvents shadow writes,
// shown oldest first, and says older ones were left out: a project held in shadow for months
// writes a record per comment, label and run, and each page load rendered them all.
func shadowPageBounded(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	mb := storetest.Settled(t, s, 1, func(*mailbox.Mailbox) {})
	const extra = 5
	for i := range web.MaxTimelineEvents + extra {
		_, err := s.RecordShadow(ctx, mailbox.ShadowWrite{Target: mb.Ref(), Kind: mailbox.ShadowComment,
			Body: fmt.Sprintf("post %d", i)})
		require.NoError(t, err)
		c.Add(time.Millisecond)
	}
	d, err := s.Mailbox(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, d.Shadow, web.MaxTimelineEvents)
	require.True(t, d.ShadowCut, "the page says older writes are not shown")
	require.Equal(t, fmt.Sprintf("post %d", extra), d.Shadow[0].Body, "the oldest shown")
	require.Equal(t, fmt.Sprintf("post %d", web.MaxTimelineEvents+extra-1), d.Shadow[len(d.Shadow)-1].Body, "the newest last")
}
