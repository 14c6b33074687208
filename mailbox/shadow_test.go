package mailbox_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// forgeWrites are the Fake's methods that change the forge.
var forgeWrites = map[string]bool{"Comment": true, "EditComment": true, "SetIssueBody": true, "SetLabels": true,
	"EnsureLabels": true, "SetAssignees": true, "CreateMergeRequest": true, "Reply": true, "ResolveThread": true,
	"PostReview": true, "Merge": true}

// writes counts the calls that changed the fake forge.
func (b *bundle) writes() int {
	n := 0
	for _, c := range b.fake.Calls() {
		if forgeWrites[c.Method] {
			n++
		}
	}
	return n
}

// setupShadow is setup with the forge wrapped as cmd/alfred wires it (mailbox.Shadow under
// mailbox.GuardPosts) and the project in shadow mode while shadow is true.
func setupShadow(t *testing.T, labels ...string) (*bundle, *mailboxtest.ShadowLog, *atomic.Bool) {
	t.Helper()
	b := setup(t, labels...)
	var shadow atomic.Bool
	shadow.Store(true)
	log := mailboxtest.NewShadowLog(b.clock.Now)
	on := func(string) bool { return shadow.Load() }
	f := mailbox.GuardPosts(mailbox.Shadow(b.fake, mailbox.ShadowConfig{Forge: "gl", BotLogin: forgetest.BotLogin, On: on, Log: log}),
		mailbox.PostGuard{})
	cfg := mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, ShadowLog: log,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{Shadow: shadow.Load()} }}
	b.bots = map[string]mailbox.Bot{"gl": {Forge: f, Login: forgetest.BotLogin}}
	b.machine = mailbox.NewMachine(cfg, b.store, b.bots, b.exec, b.clock.Now, b.log)
	return b, log, &shadow
}

// shadowKinds lists the kinds of the writes recorded, in order.
func shadowKinds(ws []mailbox.ShadowWrite) []mailbox.ShadowKind {
	var out []mailbox.ShadowKind
	for _, w := range ws {
		out = append(out, w.Kind)
	}
	return out
}

func TestShadowLifecycleWritesNothingThenLivePosts(t *testing.T) {
	t.Parallel()
	b, log, shadow := setupShadow(t, "type::task")
	ctx := context.Background()

	b.deliver(assign("alice")) // the harness assigns the bot on the fake: a human's write
	base := b.writes()
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Equal(t, base, b.writes(), "shadow mode writes nothing to the forge")
	require.Empty(t, b.comments())
	require.Empty(t, b.status())

	// The machine reads its own writes back: the issue as it would be.
	is, err := b.bots["gl"].Forge.Issue(ctx, b.ref)
	require.NoError(t, err)
	require.Contains(t, is.Labels, "status::waiting_info")
	require.Contains(t, is.Assignees, "alice", "the author is assigned: their turn")
	cs, err := b.bots["gl"].Forge.Comments(ctx, b.ref)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Contains(t, cs[0].Body, "Thanks @alice, I am on it")
	require.Contains(t, cs[1].Body, "### q1. Which separator?")
	require.Negative(t, cs[1].ID, "a synthetic id")

	// A human reads the questions on the pages and answers on the forge.
	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, base, b.writes())
	require.Equal(t, "We need a CSV export.", b.fake.IssueBody(b.ref), "the description is the forge's")
	is, err = b.bots["gl"].Forge.Issue(ctx, b.ref)
	require.NoError(t, err)
	require.Contains(t, is.Body, "| q1. Which separator? | b. Semicolon | @alice |")
	cs, err = b.bots["gl"].Forge.Comments(ctx, b.ref)
	require.NoError(t, err)
	require.Contains(t, cs[1].Body, "**Answered by @alice.**", "the question block, edited in place")

	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb = b.advance()
	require.Equal(t, mailbox.StateInDevelopment, mb.State, "shadow mode starts no run that pushes")
	require.Equal(t, base, b.writes())
	for _, j := range b.exec.jobs {
		require.True(t, j.Input.Phase.ReadOnly(), "only read-only phases run in shadow: %s", j.Input.Phase)
	}
	b.clock.Add(2 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInDevelopment, mb.State)
	ws := log.All()
	runs := 0
	for _, w := range ws {
		if w.Kind == mailbox.ShadowRun {
			runs++
			require.Equal(t, "development", w.Detail["phase"])
		}
	}
	require.Equal(t, 1, runs, "the held run is recorded once")
	kinds := shadowKinds(ws)
	require.Contains(t, kinds, mailbox.ShadowEnsureLabels)
	require.Contains(t, kinds, mailbox.ShadowAssignees)
	require.Contains(t, kinds, mailbox.ShadowIssueBody)
	require.Equal(t, base, b.writes())

	// Live: the next pass runs the development and posts on the forge; nothing of the shadow
	// history is replayed.
	shadow.Store(false)
	before := len(log.All())
	b.clock.Add(2 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, []string{"status::in_ci"}, b.status())
	require.NotZero(t, mb.MRNumber)
	require.Positive(t, mb.MRNumber)
	require.Equal(t, before, len(log.All()), "live mode records nothing")
	all := strings.Join(b.comments(), "\n")
	require.Contains(t, all, "I opened merge request")
	require.NotContains(t, all, "### q1. Which separator?", "the shadow questions are not replayed")
	require.Equal(t, phase.Development, b.exec.jobs[len(b.exec.jobs)-1].Input.Phase)
	b.requireUniqueMarkers()
}

func TestShadowCommentIsPostedAnewOnceLive(t *testing.T) {
	t.Parallel()
	b, _, shadow := setupShadow(t, "type::task")
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Empty(t, b.comments())

	// Live while the questions wait: the answered question block, posted in shadow under a
	// synthetic id, is posted on the forge rather than edited.
	shadow.Store(false)
	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	all := strings.Join(b.comments(), "\n")
	require.Contains(t, all, "**Answered by @alice.**")
	require.NotContains(t, all, "Thanks @alice, I am on it", "the acknowledgement is not replayed")
	require.Equal(t, []string{"status::waiting_validation"}, b.status())
	b.requireUniqueMarkers()
}

// The shadow wrapper records the review loop's and the merge's writes too, answers them with
// synthetic ids, reads back a merge request opened in shadow, and passes every call through
// for a repository not in shadow.
func TestShadowRecordsReviewsMergesAndMergeRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := forgetest.NewFake(forge.KindForgejo)
	fake.AddUser("alice")
	fake.AddRepo(repo, "main", "/nonexistent.git")
	fake.AddRepo("acme/live", "main", "/nonexistent.git")
	n := fake.AddIssue(repo, forgetest.SeedIssue{Title: "t", Author: "alice"})
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	log := mailboxtest.NewShadowLog(c.Now)
	f := mailbox.Shadow(fake, mailbox.ShadowConfig{Forge: "fj", BotLogin: forgetest.BotLogin, Log: log,
		On: func(r string) bool { return r == repo }})
	rv, ok := f.(forge.Reviews)
	require.True(t, ok, "forge.Reviews kept")
	mg, ok := f.(forge.Merger)
	require.True(t, ok, "forge.Merger kept")

	mr, err := f.CreateMergeRequest(ctx, repo, forge.NewMergeRequest{SourceBranch: "agent/x", TargetBranch: "main", Title: "Add x", Body: "Closes #1"})
	require.NoError(t, err)
	require.Negative(t, mr.Number)
	got, err := f.MergeRequest(ctx, repo, mr.Number)
	require.NoError(t, err)
	require.Equal(t, "agent/x", got.SourceBranch)
	id, err := rv.PostReview(ctx, repo, 7, forge.NewReview{Body: "Looks good.", Event: forge.ReviewApprove,
		Comments: []forge.NewReviewComment{{Position: forge.Position{Path: "a.go", NewLine: 3}, Body: "nit"}}})
	require.NoError(t, err)
	require.Negative(t, id)
	rid, err := rv.Reply(ctx, repo, 7, forge.ReviewComment{ID: 55, Thread: "a.go:+3"}, "Fixed.")
	require.NoError(t, err)
	require.Negative(t, rid)
	require.NoError(t, rv.ResolveThread(ctx, repo, 7, "a.go:+3"))
	require.NoError(t, mg.Merge(ctx, repo, 7, forge.MergeOptions{Method: forge.MergeSquash, HeadSHA: "abc"}))
	ref := forge.IssueRef{Forge: "fj", Repo: repo, Number: n}
	require.NoError(t, f.SetAssignees(ctx, ref, []string{"alice"}, nil))
	require.NoError(t, f.EnsureLabels(ctx, repo, []string{"status::done"}))
	for _, c := range fake.Calls() {
		require.False(t, forgeWrites[c.Method], "no write reaches the forge: %s", c.Method)
	}
	ws, err := log.ShadowWrites(ctx, forge.IssueRef{Forge: "fj", Repo: repo, Number: 7, MergeRequest: true})
	require.NoError(t, err)
	require.Equal(t, []mailbox.ShadowKind{mailbox.ShadowReview, mailbox.ShadowReply, mailbox.ShadowResolve, mailbox.ShadowMerge}, shadowKinds(ws))
	require.Equal(t, "approve", ws[0].Detail["event"])
	require.Equal(t, "a.go:+3: nit", ws[0].Detail["comments"])
	require.Equal(t, "squash", ws[3].Detail["method"])
	is, err := f.Issue(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{"alice"}, is.Assignees, "the assignees read back")

	// Comments since a time: a shadow comment posted before it is left out unless edited after.
	c1, err := f.Comment(ctx, ref, "first")
	require.NoError(t, err)
	ws, err = log.ShadowWrites(ctx, ref)
	require.NoError(t, err)
	since := ws[len(ws)-1].At.Add(time.Nanosecond)
	cs, err := f.CommentsSince(ctx, ref, since)
	require.NoError(t, err)
	require.Empty(t, cs)
	c.Add(time.Second)
	require.NoError(t, f.EditComment(ctx, ref, c1, "first, edited"))
	cs, err = f.CommentsSince(ctx, ref, since)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, "first, edited", cs[0].Body)
	require.Equal(t, forgetest.BotLogin, cs[0].Author.Login)

	// Another repository is live: its writes reach the forge.
	live := fake.AddIssue("acme/live", forgetest.SeedIssue{Title: "t", Author: "alice"})
	_, err = f.Comment(ctx, forge.IssueRef{Forge: "fj", Repo: "acme/live", Number: live}, "hello")
	require.NoError(t, err)
	require.Len(t, fake.IssueComments(forge.IssueRef{Repo: "acme/live", Number: live}), 1)
}

// shadowMachine is a machine on jobs whose one project is in shadow mode, and the log that
// records what it would have written.
func (b *bundle) shadowMachine(jobs mailbox.JobRunner) (*mailbox.Machine, *mailboxtest.ShadowLog) {
	log := mailboxtest.NewShadowLog(b.clock.Now)
	f := mailbox.Shadow(b.fake, mailbox.ShadowConfig{Forge: "gl", BotLogin: forgetest.BotLogin, Log: log,
		On: func(string) bool { return true }})
	m := mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, ShadowLog: log,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{Shadow: true} }}, b.store,
		map[string]mailbox.Bot{"gl": {Forge: f, Login: forgetest.BotLogin}}, jobs, b.clock.Now, b.log)
	return m, log
}

// A development run started live and recovered after its project switched to shadow mode is
// collected without its push: the recovery's job does not push.
func TestShadowRecoveredRunDoesNotPush(t *testing.T) {
	t.Parallel()
	b, _, rx, run := crashedInDevelopment(t)
	m, _ := b.shadowMachine(rx)
	var pushed []bool
	rx.recover = func(job phase.Job, _ bool) *phase.Outcome {
		require.Equal(t, run.ID, job.RunID)
		pushed = append(pushed, job.Push)
		return &phase.Outcome{Recovered: true, Container: "c", Result: &phase.Result{Summary: "Added the CSV export."}}
	}
	ctx := context.Background()
	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	_, err = m.RecoverRuns(ctx, mb)
	require.NoError(t, err)
	require.Equal(t, []bool{false}, pushed, "shadow mode never pushes")
	base := b.writes()
	mb = b.advanceWith(m)
	require.Zero(t, mb.MRNumber, "no merge request on the forge")
	require.Equal(t, base, b.writes())
}

// In shadow mode the mailbox's view of the labels is the forge's: a human's label change on
// the forge, whose event lists the forge's labels (without the status label Alfred did not
// write), does not read as the status label removed.
func TestShadowLabelEventKeepsABlockedIssueBlocked(t *testing.T) {
	t.Parallel()
	b, _, _ := setupShadow(t, "type::task")
	b.exec.failures["analysis.functional"] = "agent wrote no result"
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Empty(t, b.status(), "the forge has no status label")
	delete(b.exec.failures, "analysis.functional") // a wrongful resume would now go on

	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "priority::high")})
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State, "status::blocked was never on the forge, so nobody removed it")
}

// An auto-merge in shadow mode is recorded once per head and not made: the merge request stays
// open and the issue in review.
func TestShadowAutoMergeIsRecordedNotMade(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	log := mailboxtest.NewShadowLog(b.clock.Now)
	f := mailbox.GuardPosts(mailbox.Shadow(b.fake, mailbox.ShadowConfig{Forge: "gl", BotLogin: forgetest.BotLogin, Log: log,
		On: func(string) bool { return true }}), mailbox.PostGuard{})
	cfg := mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, ShadowLog: log,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{AutoMerge: true, Shadow: true} }}
	b.machine = mailbox.NewMachine(cfg, b.store, map[string]mailbox.Bot{"gl": {Forge: f, Login: forgetest.BotLogin}},
		b.exec, b.clock.Now, b.log)
	base := b.writes()
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State, "held in review")
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Zero(t, b.merges(), "nothing merged on the forge")
	require.Equal(t, base, b.writes())
	var merges []mailbox.ShadowWrite
	for _, w := range log.All() {
		if w.Kind == mailbox.ShadowMerge {
			merges = append(merges, w)
		}
	}
	require.Len(t, merges, 1, "recorded once for the head")
	require.Equal(t, mb.HeadSHA, merges[0].Detail["head_sha"])
}

// While shadow mode holds a run, the passes every ci_poll edit the status comment again: the
// record keeps the latest edit of each comment only, so it grows with the work done, not with
// the time the run is held.
func TestShadowHeldRunKeepsTheLatestEditOnly(t *testing.T) {
	t.Parallel()
	b, log, shadow := setupShadow(t, "type::task")
	usage := &jobUsage{exec: b.exec}
	b.machine = mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, ShadowLog: log, Usage: usage,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{Shadow: shadow.Load()} }},
		b.store, b.bots, b.exec, b.clock.Now, b.log)
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	b.advance()
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb := b.advance()
	require.Equal(t, mailbox.StateInDevelopment, mb.State, "the run is held")

	edits := func() map[int64]int {
		n := map[int64]int{}
		for _, w := range log.All() {
			if w.Kind == mailbox.ShadowEditComment {
				n[w.CommentID]++
			}
		}
		return n
	}
	size := len(log.All())
	for range 20 {
		b.clock.Add(2 * time.Minute)
		mb = b.advance()
		require.Equal(t, mailbox.StateInDevelopment, mb.State)
	}
	for id, n := range edits() {
		require.Equal(t, 1, n, "comment %d: one entry, the latest edit", id)
	}
	require.LessOrEqual(t, len(log.All()), size+len(edits()), "twenty passes add at most one entry per comment")

	// What the machine reads back is the latest edit.
	cs, err := b.bots["gl"].Forge.Comments(context.Background(), b.ref)
	require.NoError(t, err)
	var last mailbox.ShadowWrite
	for _, w := range log.All() {
		if w.Kind == mailbox.ShadowEditComment {
			last = w
		}
	}
	require.NotZero(t, last.ID, "the status comment is edited while the run is held")
	found := false
	for _, c := range cs {
		if c.ID == last.CommentID {
			require.Equal(t, last.Body, c.Body)
			found = true
		}
	}
	require.True(t, found, "the edited comment is read back")
}

// An auto-merge shadow mode recorded instead of making is made once the project goes live:
// the head it was recorded for is not skipped for ever.
func TestShadowRecordedMergeIsMadeOnceLive(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	var shadow atomic.Bool
	shadow.Store(true)
	log := mailboxtest.NewShadowLog(b.clock.Now)
	f := mailbox.GuardPosts(mailbox.Shadow(b.fake, mailbox.ShadowConfig{Forge: "gl", BotLogin: forgetest.BotLogin, Log: log,
		On: func(string) bool { return shadow.Load() }}), mailbox.PostGuard{})
	cfg := mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, ShadowLog: log,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{AutoMerge: true, Shadow: shadow.Load()} }}
	b.machine = mailbox.NewMachine(cfg, b.store, map[string]mailbox.Bot{"gl": {Forge: f, Login: forgetest.BotLogin}},
		b.exec, b.clock.Now, b.log)
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Zero(t, b.merges(), "shadow: recorded, not made")
	require.NotEmpty(t, mb.Data.ShadowMerged)

	shadow.Store(false) // the project goes live
	b.clock.Add(10 * time.Minute)
	mb = b.poll()
	require.Equal(t, 1, b.merges(), "live now: the merge shadow mode held is made")
	require.Equal(t, mailbox.StateDone, mb.State)
}

// A run that pushes, started live and collected after the project was switched to shadow
// (without its push), is acted on in shadow as the spec says — a run that changed nothing
// blocks the issue, the block recorded, not posted — not held until the project is live, where
// its stale outcome would post a real block instead of starting the run.
func TestAPushRunRecoveredInShadowIsActedOnInShadow(t *testing.T) {
	t.Parallel()
	b, _, rx, _ := crashedInDevelopment(t)
	m, log := b.shadowMachine(rx)
	rx.recover = func(job phase.Job, _ bool) *phase.Outcome {
		require.False(t, job.Push, "no job of a project in shadow pushes")
		return &phase.Outcome{Recovered: true, Container: "c", Result: &phase.Result{Summary: "Added the CSV export."}}
	}
	before := len(b.comments())
	mb := b.advanceWith(m)
	require.Equal(t, mailbox.StateBlocked, mb.State, "the outcome is acted on in shadow")
	require.Len(t, b.comments(), before, "nothing posted on the forge")
	var bodies []string
	for _, w := range log.All() {
		bodies = append(bodies, w.Body)
	}
	require.Contains(t, strings.Join(bodies, "\n"), "changed no file", "the block is a shadow write")
	for _, w := range log.All() {
		require.NotEqual(t, mailbox.ShadowRun, w.Kind, "no run is held: it ran")
	}
}

// A recovered outcome that would open a merge request (a later attempt's run, whose branch may
// hold an earlier attempt's push) waits for the project to be live: shadow opens no merge
// request, not even a recorded one the mailbox would then take for real.
func TestARecoveredRunThatWouldOpenAMergeRequestWaitsForLive(t *testing.T) {
	t.Parallel()
	b, _, rx, run := crashedInDevelopment(t)
	require.NoError(t, b.store.FinishRun(context.Background(), &mailbox.Run{ID: run.ID, MailboxID: run.MailboxID,
		Phase: run.Phase, Status: mailbox.RunInterrupted, Outcome: "interrupted", Applied: true}))
	second := &mailbox.Run{MailboxID: run.MailboxID, Phase: run.Phase}
	require.NoError(t, b.store.StartRun(context.Background(), second))
	require.Equal(t, 2, second.Attempt)
	m, log := b.shadowMachine(rx)
	rx.recover = func(phase.Job, bool) *phase.Outcome {
		return &phase.Outcome{Recovered: true, Container: "c", Result: &phase.Result{Summary: "Added the CSV export."}}
	}
	mb := b.advanceWith(m)
	require.Equal(t, mailbox.StateInDevelopment, mb.State, "held until live")
	require.Zero(t, mb.MRNumber, "no merge request, recorded or not")
	require.NotContains(t, shadowKinds(log.All()), mailbox.ShadowMergeRequest)
}
