package mailbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// scriptedJobs stands in for runner.Service at the JobRunner seam: it answers each run key
// with a scripted result and "pushes" by moving the branch head in the fake forge. The real
// Service, with Docker and git, runs the same lifecycle in the end-to-end tests.
type scriptedJobs struct {
	mu   sync.Mutex
	fake interface {
		SetBranch(repo, branch, sha string)
	}
	results  map[string]*phase.Result
	failures map[string]string
	jobs     []phase.Job
	cleanups []int64
	// removedSessions lists the mailboxes whose session state was removed.
	removedSessions []int64
	block           chan struct{} // when set, Execute waits on it or on ctx
	// during, when set, is called inside Execute, as the agent runs.
	during func(job phase.Job)
	// cause is why the last blocked Execute's context ended (context.Cause).
	cause error
}

func (e *scriptedJobs) Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error) {
	e.mu.Lock()
	e.jobs = append(e.jobs, job)
	block, during := e.block, e.during
	e.mu.Unlock()
	if during != nil {
		during(job)
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			e.mu.Lock()
			e.cause = context.Cause(ctx)
			e.mu.Unlock()
			if errors.Is(context.Cause(ctx), phase.ErrDetach) { // as runner.Service: left running
				return &phase.Outcome{Interrupted: true, Detached: true}, nil
			}
			return &phase.Outcome{Interrupted: true, ExitCode: 137}, nil
		}
	}
	key := job.Input.Key
	if f := e.failures[key]; f != "" {
		return &phase.Outcome{Failure: f, ExitCode: 1}, nil
	}
	r, ok := e.results[key]
	if !ok {
		return &phase.Outcome{Failure: "agent wrote no result", ExitCode: 0}, nil
	}
	out := &phase.Outcome{Result: r, Container: fmt.Sprintf("alfred-mbx%d-r%d", job.MailboxID, job.RunID)}
	if job.Push {
		out.HeadSHA = fmt.Sprintf("%040d", job.RunID)
		e.fake.SetBranch(job.Repository.Path, job.Branch, out.HeadSHA)
	}
	return out, nil
}

func (e *scriptedJobs) RemoveSessions(id int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removedSessions = append(e.removedSessions, id)
	return nil
}

func (e *scriptedJobs) Cleanup(_ context.Context, id int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, id)
	return nil
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type bundle struct {
	t       testing.TB
	store   storetest.Store
	fake    *forgetest.Fake
	exec    *scriptedJobs
	machine *mailbox.Machine
	clock   *clock
	ref     forge.IssueRef
	seq     int
	bots    map[string]mailbox.Bot
	log     *slog.Logger
}

const repo = "acme/shop"

func setup(t *testing.T, labels ...string) *bundle {
	t.Helper()
	return setupWith(t, guard{}, labels...)
}

// guard configures setupWith: when limits is set, the fake forge is wrapped as the command
// does (mailbox.GuardPosts), with redact as the censor of the posts and of the machine; store
// builds the store (mailboxtest's when nil, or PostgreSQL's).
type guard struct {
	limits *mailbox.PostLimits
	redact func(string) string
	// config is the machine's configuration; CIWait, CIPoll and Redact are set here.
	config mailbox.Config
	store  func(now func() time.Time) storetest.Store
	// wrap, when set, wraps the forge the machine posts through (after the post guard).
	wrap func(forge.Forge) forge.Forge
}

func setupWith(t testing.TB, g guard, labels ...string) *bundle {
	t.Helper()
	fake := forgetest.NewFake(forge.KindGitLab)
	fake.AddUser("alice")
	fake.AddUser("mallory")
	fake.AddRepo(repo, "main", "/nonexistent.git")
	fake.SetAccess(repo, "alice", true)
	fake.SetAccess(repo, "mallory", false)
	n := fake.AddIssue(repo, forgetest.SeedIssue{Title: "Export the monthly report as CSV", Body: "We need a CSV export.",
		Author: "alice", Labels: labels})
	exec := &scriptedJobs{fake: fake, results: map[string]*phase.Result{
		"analysis.functional": {Summary: "understood", Understanding: "You want a CSV export of the monthly report.",
			Questions: []phase.Question{{ID: "q1", Title: "Which separator?", Default: "a", Options: []phase.Option{
				{ID: "a", Label: "Comma", Description: "RFC 4180"}, {ID: "b", Label: "Semicolon", Description: "Excel in Europe"}}}},
			ExpectedBehaviour: "A button downloads the CSV.", AcceptanceCriteria: []string{"the file opens in a spreadsheet"},
			OutOfScope: []string{"PDF"}},
		"analysis.technical": {Summary: "planned", Plan: "1. Add an export endpoint.\n2. Add a button."},
		"development":        {Summary: "Added the CSV export.", CommitMessage: "Add CSV export"},
		"ci_fix":             {Summary: "Fixed the test.", CommitMessage: "Fix test"},
		"answer":             {Summary: "answered", Answer: "Use the export button."},
	}, failures: map[string]string{}}
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	newStore := g.store
	if newStore == nil {
		newStore = func(now func() time.Time) storetest.Store { return mailboxtest.NewStore(now) }
	}
	store := newStore(c.Now)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var posts forge.Forge = fake
	if g.limits != nil {
		posts = mailbox.GuardPosts(fake, mailbox.PostGuard{Censor: g.redact, Limits: *g.limits})
	}
	if g.wrap != nil {
		posts = g.wrap(posts)
	}
	cfg := g.config
	cfg.CIWait, cfg.CIPoll, cfg.Redact = 10*time.Minute, time.Minute, g.redact
	bots := map[string]mailbox.Bot{"gl": {Forge: posts, Login: forgetest.BotLogin}}
	m := mailbox.NewMachine(cfg, store, bots, exec, c.Now, log)
	return &bundle{t: t, store: store, fake: fake, exec: exec, machine: m, clock: c, bots: bots, log: log,
		ref: forge.IssueRef{Forge: "gl", Repo: repo, Number: n}}
}

func (b *bundle) deliver(ev forge.Event) {
	b.t.Helper()
	dup, err := b.store.Deliver(context.Background(), b.delivery(ev))
	require.NoError(b.t, err)
	require.False(b.t, dup)
}

// delivery is ev as the receiver stores it: a delivery id, body hash, forge and target of its
// own, received now (an assignment changes the forge first).
func (b *bundle) delivery(ev forge.Event) forge.Event {
	b.t.Helper()
	if ev.Type == forge.EventAssignees && ev.Target.Repo == "" && ev.Sender.Login != forgetest.BotLogin {
		// The forge changed before it sent the event.
		cur := b.fake.IssueAssignees(b.ref)
		require.NoError(b.t, b.fake.SetAssignees(context.Background(), b.ref, ev.Assignees, cur))
	}
	b.seq++
	ev.Forge, ev.Kind = "gl", forge.KindGitLab
	ev.DeliveryID = fmt.Sprintf("d-%d", b.seq)
	ev.BodyHash = fmt.Sprintf("h-%d", b.seq)
	if ev.Target.Repo == "" {
		ev.Target = b.ref
	}
	ev.ReceivedAt = b.clock.Now()
	return ev
}

func (b *bundle) advance() *mailbox.Mailbox {
	b.t.Helper()
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	require.NoError(b.t, b.machine.Advance(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	return mb
}

func (b *bundle) status() []string {
	var out []string
	for _, l := range b.fake.IssueLabels(b.ref) {
		if strings.HasPrefix(l, "status::") {
			out = append(out, l)
		}
	}
	return out
}

func (b *bundle) comments() []string {
	var out []string
	for _, c := range b.fake.IssueComments(b.ref) {
		out = append(out, c.Body)
	}
	return out
}

// requireUniqueMarkers fails when two comments carry the same Alfred key.
func (b *bundle) requireUniqueMarkers() {
	b.t.Helper()
	seen := map[string]bool{}
	for _, c := range b.comments() {
		if k, _, ok := mailbox.ParseMarker(c); ok {
			require.False(b.t, seen[k], "comment %s posted twice", k)
			seen[k] = true
		}
	}
}

func (b *bundle) lastComment() string {
	cs := b.comments()
	require.NotEmpty(b.t, cs)
	return cs[len(cs)-1]
}

// failedPass makes one pass over the issue's mailbox that must fail (a forge call the test
// makes fail), as a worker's would: nothing it did in memory is saved.
func (b *bundle) failedPass(msgAndArgs ...any) {
	b.t.Helper()
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	require.Error(b.t, b.machine.Advance(context.Background(), mb), msgAndArgs...)
}

// lastCommentID is the forge's id of the issue's last comment.
func (b *bundle) lastCommentID() int64 {
	cs, err := b.fake.Comments(context.Background(), b.ref)
	require.NoError(b.t, err)
	require.NotEmpty(b.t, cs)
	return cs[len(cs)-1].ID
}

func assign(by string) forge.Event {
	return forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: by}, AssigneesKnown: true,
		Assignees: []string{forgetest.BotLogin}}
}

// commentIDs numbers the comments of comment as a forge does: each comment has its own id.
var commentIDs atomic.Int64

func comment(by, body string) forge.Event {
	return forge.Event{Type: forge.EventComment, Sender: forge.User{Login: by},
		Comment: &forge.Comment{ID: 1000 + commentIDs.Add(1), Body: body}}
}

// A comment written while the analysis ran, before the questions existed ("👍" to "I am on
// it"), waits for the run and is applied after the block is posted: it is no reply to the
// questions, so the round stays open and its text is kept as context.
func TestCommentBeforeTheQuestionsAnswersNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.during = func(job phase.Job) {
		if job.Input.Key != "analysis.functional" {
			return
		}
		id := b.fake.AddComment(b.ref, "alice", "👍")
		b.deliver(forge.Event{Type: forge.EventComment, Sender: forge.User{Login: "alice"},
			Comment: &forge.Comment{ID: id, Body: "👍"}})
	}
	b.deliver(assign("alice"))
	mb := b.advance()
	for range 3 {
		mb = b.advance()
	}
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the questions stay open")
	require.NotContains(t, b.fake.IssueBody(b.ref), "Answered by @alice")
}

// A question block whose post failed and is retried after the deadline it would have had is
// posted with a deadline counted from that post: the author always gets the whole wait.
func TestQuestionsPostedLateGetTheirWholeWait(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.during = func(job phase.Job) {
		if job.Input.Key == "analysis.functional" {
			b.fake.FailNextCall("Comment", forge.ErrUnavailable)
		}
	}
	b.deliver(assign("alice"))
	b.failedPass()
	b.clock.Add(25 * time.Hour) // past the 24 h the block would have announced
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the defaults are not applied at once")
	want := b.clock.Now().Add(24 * time.Hour).Truncate(time.Minute)
	require.Contains(t, b.lastComment(), "Without an answer by "+want.UTC().Format("2006-01-02 15:04")+" UTC")
}

func TestLifecycleTaskWithReply(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")

	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Equal(t, []string{"status::waiting_info"}, b.status())
	require.Contains(t, b.comments()[0], "Thanks @alice, I am on it")
	q := b.lastComment()
	require.Contains(t, q, "### q1. Which separator?")
	require.Contains(t, q, "- [x] **a. Comma** _(default)_")
	require.Contains(t, q, "Without an answer by 2026-11-30 10:00 UTC, I will apply the defaults.")
	require.Contains(t, b.fake.IssueAssignees(b.ref), "alice", "the author is assigned: their turn")
	require.Equal(t, "agent/issue-1-export-the-monthly-report-as-csv", mb.Branch, "branch frozen at the first run")

	b.deliver(comment("alice", "q1: b 🙂"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	answered := b.comments()[1] // the question block, edited in place
	require.Contains(t, answered, "- [x] **b. Semicolon** — Excel in Europe")
	require.Contains(t, answered, "- [ ] **a. Comma** _(default)_")
	require.Contains(t, answered, "**Answered by @alice.**")
	require.NotContains(t, answered, "Without an answer by")
	require.Equal(t, []string{"status::waiting_validation"}, b.status())
	body := b.fake.IssueBody(b.ref)
	require.True(t, strings.HasPrefix(body, "We need a CSV export.\n\n"), "the human's text is kept")
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, body, "### Acceptance criteria\n\n- the file opens in a spreadsheet")
	require.Contains(t, b.lastComment(), "Add the `ai::validate_plan` label to let me start")
	require.NotContains(t, b.fake.IssueAssignees(b.ref), "alice", "the turn is handed back")

	// Someone without write access cannot validate.
	b.addLabel("mallory", "ai::validate_plan")
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Contains(t, b.lastComment(), "@mallory, only a project member with write access can validate the plan")
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::validate_plan")

	b.addLabel("alice", "ai::validate_plan")
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, []string{"status::in_ci"}, b.status())
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::validate_plan")
	require.Contains(t, strings.Join(b.comments(), "\n"), "Plan validated by @alice. Starting the development.")
	require.NotZero(t, mb.MRNumber)
	mr, err := b.fake.MergeRequest(context.Background(), repo, mb.MRNumber)
	require.NoError(t, err)
	require.Equal(t, mb.Branch, mr.SourceBranch)
	require.Contains(t, mr.Body, fmt.Sprintf("Closes #%d", b.ref.Number))
	require.Contains(t, b.lastComment(), fmt.Sprintf("I opened merge request !%d", mb.MRNumber))

	// CI fails once: a ci_fix run with the failed job's log, then success.
	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL: TestExport"})
	b.deliver(forge.Event{Type: forge.EventPipeline, Target: forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		Pipeline: &forge.Pipeline{State: forge.CIFailed, SHA: mb.HeadSHA}})
	firstSHA := mb.HeadSHA
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.NotEqual(t, firstSHA, mb.HeadSHA)
	last := b.exec.jobs[len(b.exec.jobs)-1]
	require.Equal(t, phase.CIFix, last.Input.Phase)
	require.Contains(t, last.Input.CILog, "FAIL: TestExport")

	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CISuccess})
	b.clock.Add(2 * time.Minute) // the poll timer
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Equal(t, []string{"status::in_review"}, b.status())

	b.fake.MarkMerged(repo, mb.MRNumber)
	b.deliver(forge.Event{Type: forge.EventMergeRequestMerged, Sender: forge.User{Login: "alice"},
		Target:       forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: mb.MRNumber, SourceBranch: mb.Branch, Merged: true}})
	mb = b.advance()
	require.Equal(t, mailbox.StateDone, mb.State)
	require.NotNil(t, mb.ClosedAt)
	require.Equal(t, []string{"status::done"}, b.status())
	require.NotContains(t, b.fake.IssueAssignees(b.ref), forgetest.BotLogin, "the bot unassigns itself")
	require.Contains(t, b.exec.cleanups, mb.ID)
	b.requireUniqueMarkers()

	// Every run saw the branch frozen at the first run, and read-only phases did not push.
	for _, j := range b.exec.jobs {
		require.Equal(t, mb.Branch, j.Branch)
		require.Equal(t, !j.Input.Phase.ReadOnly(), j.Push)
	}
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	var keys []string
	for _, r := range runs {
		require.Equal(t, mailbox.RunSucceeded, r.Status)
		keys = append(keys, phase.KeyOf(phase.Phase(r.Phase), phase.Step(r.Step)))
	}
	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development", "ci_fix"}, keys)
}

// A type label on the issue that the mailbox never saw arrive (the poll and the reconciliation
// see no label change before the assignment they derive) is taken at the assignment only when
// the label history shows a writer, the issue's author or the bot adding it: a reader's
// type::question leaves the type question open; a writer's is taken.
func TestTypeLabelUnseenBeforeTheAssignmentPassesTheGate(t *testing.T) {
	t.Parallel()
	for who, want := range map[string]string{"mallory": "", "alice": "question"} {
		t.Run(who, func(t *testing.T) {
			t.Parallel()
			b := setup(t) // no type label; the issue is alice's
			b.fake.SetIssueLabels(b.ref, who, "type::question")
			ev := assign("alice")
			ev.Action = "reconcile" // derived by the poll: no delivery told of the label
			b.deliver(ev)
			mb := b.advance()
			require.Equal(t, want, mb.Type)
			if want == "" {
				require.Equal(t, mailbox.StateWaitingType, mb.State, "the type question is asked")
			}
		})
	}
}

func TestTypeQuestionThenDeadlineAppliesDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t) // no type label

	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingType, mb.State)
	require.Equal(t, []string{"status::waiting_info"}, b.status())
	require.Contains(t, b.lastComment(), "**d. question**")
	require.Contains(t, b.lastComment(), "- [x] **c. analysis** _(default)_")

	// Nothing happens before the deadline.
	b.clock.Add(23 * time.Hour)
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingType, mb.State)

	// At the deadline the default (analysis) applies: the analysis asks its own question,
	// whose deadline applies the default again, and the analysis is the deliverable.
	b.clock.Add(2 * time.Hour)
	mb = b.advance()
	require.Equal(t, "analysis", mb.Type)
	require.Contains(t, b.fake.IssueLabels(b.ref), "type::analysis")
	require.Contains(t, strings.Join(b.comments(), "\n"), "so I applied the defaults:\n\n- **q1. What kind of work is this issue?** → c. analysis")
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)

	b.clock.Add(25 * time.Hour)
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | a. Comma | default |")
	require.Contains(t, b.lastComment(), "The analysis is in the issue description")
	b.requireUniqueMarkers()
}

func TestTypeLabelAndQuestionAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "type::question")})
	mb := b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Contains(t, b.lastComment(), "Use the export button.")
}

func TestStartNeedsWriteAccessAndIgnoresBots(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("mallory"))
	mb := b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State)
	require.Contains(t, b.lastComment(), "@mallory, only a project member with write access can assign me")

	// The bot's own assignment events never start work.
	b.deliver(assign(forgetest.BotLogin))
	mb = b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State)
	require.Len(t, b.exec.jobs, 0)
}

func TestRunFailureBlocksAndRetryResumes(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.failures["analysis.functional"] = "agent wrote no result"
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, []string{"status::blocked"}, b.status())
	require.Contains(t, b.lastComment(), "the analysis.functional run (attempt 1) failed: agent wrote no result")

	delete(b.exec.failures, "analysis.functional")
	b.deliver(comment("mallory", "retry"))
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State, "retry needs write access")

	b.deliver(comment("alice", "retry"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, mailbox.RunFailed, runs[0].Status)
	require.Equal(t, 2, runs[1].Attempt)
}

// advanceToFirstJob advances the mailbox in the background and returns once its first job is
// handed to the executor (which b.exec.block holds); the channel gives the mailbox when the
// advance ends.
func (b *bundle) advanceToFirstJob() <-chan *mailbox.Mailbox {
	b.t.Helper()
	done := make(chan *mailbox.Mailbox, 1)
	go func() { done <- b.advance() }()
	require.Eventually(b.t, func() bool {
		b.exec.mu.Lock()
		defer b.exec.mu.Unlock()
		return len(b.exec.jobs) == 1
	}, 10*time.Second, 20*time.Millisecond)
	return done
}

func TestUnassignDuringRunStopsIt(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.block = make(chan struct{})
	b.deliver(assign("alice"))
	done := b.advanceToFirstJob()
	b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true})
	mb := <-done
	require.Equal(t, mailbox.StateCancelled, mb.State)
	require.Contains(t, b.exec.cleanups, mb.ID)
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Equal(t, mailbox.RunInterrupted, runs[0].Status)
}

// pendingReads is a store that signals reads, each read of a mailbox's pending events (a run's
// watch for a cancelling event).
type pendingReads struct {
	storetest.Store
	reads chan struct{}
}

func (p pendingReads) PendingEvents(ctx context.Context, id int64) ([]mailbox.StoredEvent, error) {
	evs, err := p.Store.PendingEvents(ctx, id)
	select {
	case p.reads <- struct{}{}:
	default:
	}
	return evs, err
}

// A cancelling input from someone the gate does not allow it to stops no run: a reader adding
// status::blocked, or unassigning the bot where permissions.unassign asks for write, while the
// analysis runs. The run goes on to its outcome; the pass then refuses the input (the label
// removed, the bot assigned again).
func TestRefusedCancelDuringRunStopsNothing(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		needs gate.Needs
		ev    func(labels []string) forge.Event
	}{
		"blocked label": {ev: func(labels []string) forge.Event {
			return forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "mallory"}, LabelsKnown: true,
				Labels: append(labels, "status::blocked")}
		}},
		"unassign": {needs: gate.Needs{gate.Unassign: forge.RoleWrite}, ev: func([]string) forge.Event {
			return forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "mallory"}, AssigneesKnown: true}
		}},
		// Another bot with write access: the pass records its labels and acts on none.
		"blocked label by another bot": {ev: func(labels []string) forge.Event {
			return forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "ci-bot"}, LabelsKnown: true,
				Labels: append(labels, "status::blocked")}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev := c.ev
			reads := make(chan struct{}, 64)
			b := setupWith(t, guard{config: mailbox.Config{Needs: c.needs}, store: func(now func() time.Time) storetest.Store {
				return pendingReads{Store: mailboxtest.NewStore(now), reads: reads}
			}}, "type::task")
			b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
			b.fake.AddUser("ci-bot")
			b.fake.SetAccess(repo, "ci-bot", true)
			hold := make(chan struct{})
			b.exec.block = hold
			b.deliver(assign("alice"))
			done := b.advanceToFirstJob()
			e := ev(b.fake.IssueLabels(b.ref))
			if e.Type == forge.EventLabels {
				require.NoError(t, b.fake.SetLabels(context.Background(), b.ref, []string{"status::blocked"}, nil))
			}
			for len(reads) > 0 {
				<-reads
			}
			b.deliver(e)
			// The run's watch reads the pending events twice more: once at least after the
			// delivery. The run is still held.
			for range 2 {
				select {
				case <-reads:
				case mb := <-done:
					t.Fatalf("the run was stopped: %s", mb.State)
				case <-time.After(time.Minute):
					t.Fatal("the run's watch never read the pending events")
				}
			}
			select {
			case mb := <-done:
				t.Fatalf("the run was stopped: %s", mb.State)
			default:
			}
			close(hold)
			mb := <-done
			for i := 0; i < 5 && mb.State != mailbox.StateWaitingValidation; i++ {
				mb = b.advance()
			}
			require.Equal(t, mailbox.StateWaitingValidation, mb.State, "the refused input changed nothing")
			runs, err := b.store.Runs(context.Background(), mb.ID)
			require.NoError(t, err)
			require.Equal(t, mailbox.RunSucceeded, runs[0].Status, "the functional analysis ran to its end")
			require.NotContains(t, b.fake.IssueLabels(b.ref), "status::blocked")
		})
	}
}

func TestNoPipelineWithinWait(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb := b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	b.clock.Add(5 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State, "still within ci_wait")
	b.clock.Add(6 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Contains(t, b.lastComment(), "No pipeline ran on this merge request. It is ready for review.")
}

// A pipeline cancelled before it ended (by a person, or by GitLab's auto-cancel) failed
// nothing: no ci_fix run is started on it and no attempt is counted. Alfred says so once, stays
// in CI, and goes on when a pipeline of the commit ends.
func TestCancelledPipelineStartsNoFix(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb := b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	jobs := len(b.exec.jobs)

	b.fake.AddPipeline(repo, mb.HeadSHA, mb.Branch, "canceled", forgetest.CIJob{Name: "test", State: forge.CIPending})
	cancelled := forge.Event{Type: forge.EventPipeline, Target: forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		Pipeline: &forge.Pipeline{State: forge.CICanceled, SHA: mb.HeadSHA}}
	b.deliver(cancelled)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State, "nothing to fix")
	require.Len(t, b.exec.jobs, jobs, "no ci_fix run")
	require.Zero(t, mb.Data.CIAttempts)
	notice := fmt.Sprintf("CI was cancelled on %s before it ended, so there is nothing for me to fix.", mb.HeadSHA[:7])
	require.Contains(t, b.lastComment(), notice)
	before := len(b.comments())
	b.deliver(cancelled) // the hook again, and the polls past ci_wait
	b.clock.Add(15 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State, "not ready for review either")
	require.Len(t, b.comments(), before, "said once")
	require.Len(t, b.exec.jobs, jobs)

	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CISuccess}) // run again
	b.clock.Add(2 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Contains(t, b.lastComment(), "CI passed on "+mb.HeadSHA[:7])
}

func TestCommentPostedOnceAcrossCrash(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	// The first Comment call fails after the forge stored it? Simulate the window: the post
	// succeeds but recording fails because the pass errors right after — here by failing the
	// next forge call, so the pass is retried with the ack already on the forge.
	b.deliver(assign("alice"))
	b.fake.FailNextCall("SetAssignees", fmt.Errorf("boom: %w", forge.ErrConflict))
	b.failedPass()
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	b.requireUniqueMarkers()
}

func TestIssueGoneClosesMailboxQuietly(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	before := len(b.comments())

	// The issue is deleted: every call about it answers 404.
	b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
		if ref.Number == b.ref.Number && !ref.MergeRequest {
			return fmt.Errorf("GET issue: %w", forge.ErrNotFound)
		}
		return nil
	})
	b.deliver(comment("alice", "q1: a"))
	mb = b.advance()
	require.Equal(t, mailbox.StateCancelled, mb.State)
	require.NotNil(t, mb.ClosedAt)
	require.Contains(t, b.exec.cleanups, mb.ID)
	require.Contains(t, b.exec.removedSessions, mb.ID, "the session state goes with the issue")
	b.fake.SetErrorHook(nil)
	require.Len(t, b.comments(), before, "no comment on a gone issue")
	pending, err := b.store.PendingEvents(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Empty(t, pending)
}

func TestMergeRequestClosedWithoutMergeCancels(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb := b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)

	// Events on someone else's merge request are not the issue's.
	b.deliver(forge.Event{Type: forge.EventMergeRequestClosed, Sender: forge.User{Login: "alice"},
		Target: forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber + 50, MergeRequest: true}})
	require.Equal(t, mailbox.StateInCI, b.advance().State)
	// Nor are those of a merge request of the same branch name (from a fork), closed by anyone.
	b.deliver(forge.Event{Type: forge.EventMergeRequestClosed, Sender: forge.User{Login: "mallory"},
		Target:       forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber + 51, MergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: mb.MRNumber + 51, SourceBranch: mb.Branch}})
	require.Equal(t, mailbox.StateInCI, b.advance().State, "a fork's merge request of the same branch name is not Alfred's")

	b.deliver(forge.Event{Type: forge.EventMergeRequestClosed, Sender: forge.User{Login: "alice"},
		Target:       forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: mb.MRNumber, SourceBranch: mb.Branch}})
	mb = b.advance()
	require.Equal(t, mailbox.StateCancelled, mb.State)
	require.Contains(t, b.exec.cleanups, mb.ID)
	require.Contains(t, b.exec.removedSessions, mb.ID)
	require.Equal(t, []string{"status::in_ci"}, b.status(), "a cancel leaves the labels as they are")
}

func TestTicksInTheQuestionBlockAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	b.advance()
	block := b.lastComment()
	edited := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	require.NotEqual(t, block, edited)
	// The forge reports the edit of Alfred's comment as an edit by alice.
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: b.lastCommentID(), Body: edited}})
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |")
}

// TestUntickingTheDefaultAnswersNothingYet: a forge sends one edit per click; unticking the
// default (the first half of choosing another option) leaves the questions open, and ticking
// the other option then answers.
func TestUntickingTheDefaultAnswersNothingYet(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	b.advance()
	block, id := b.lastComment(), b.lastCommentID()
	unticked := strings.Replace(block, "- [x] **a. Comma**", "- [ ] **a. Comma**", 1)
	require.NotEqual(t, block, unticked)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: unticked}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "no option ticked: nothing answered yet")

	chosen := strings.Replace(unticked, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: chosen}})
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |")
}

// TestEditedReplyAnswers: a reply of notes edited into an answer ("let me check" → "b")
// answers, in the editor's name; an edit that still answers nothing keeps the questions open,
// and so does a comment older than the questions edited into an answer-like text (a typo
// fixed in yesterday's "ok").
func TestEditedReplyAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	b.advance()
	block := b.lastCommentID()
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: block - 1, Body: "ok"}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "a comment older than the questions is no reply to them")

	reply := comment("alice", "Let me check with accounting.")
	b.deliver(reply)
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	reply.Type, reply.Comment.Body = forge.EventCommentEdited, "Let me check with accounting, tomorrow."
	b.deliver(reply)
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "still notes")

	reply.Comment.Body = "b, accounting says Excel."
	b.deliver(reply)
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, mb.Data.FreeText, "Let me check with accounting.")
}

// TestEditedOlderCommentAnswersNothingInShadow: in shadow mode the question block was never
// posted (its id is negative), so no comment is after it: an edit of alice's older comment
// answers nothing there either.
func TestEditedOlderCommentAnswersNothingInShadow(t *testing.T) {
	t.Parallel()
	b, _, _ := setupShadow(t, "type::task")
	old := b.fake.AddComment(b.ref, "alice", "Semicolon, I guess")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: old, Body: "Semicolon"}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
}

// TestDeletedCommentIsPostedAgain: someone deletes Alfred's question block; the answer's edit of
// it is a 404 while the issue is there, so the block is posted again, answered, and the
// issue goes on: the mailbox is not closed as if the issue were gone.
func TestDeletedCommentIsPostedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block := b.lastCommentID()
	b.fake.DeleteComment(b.ref, block)
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Nil(t, mb.ClosedAt)
	var again string
	for _, c := range b.comments() {
		if strings.Contains(c, "### q1. Which separator?") {
			again = c
		}
	}
	require.Contains(t, again, "**Answered by @alice.**", "the block, posted again")
	require.Equal(t, []string{"status::waiting_validation"}, b.status())
	b.requireUniqueMarkers()
}

// TestReplyQuotingTheQuestionBlock: a reply that quotes Alfred's question block (its hidden
// marker with it) is a reply, not an edit of the block: its own answer counts, in its name.
func TestReplyQuotingTheQuestionBlock(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	b.advance()
	quoted := "> " + strings.ReplaceAll(b.lastComment(), "\n", "\n> ") + "\n\nq1: b"
	b.deliver(comment("alice", quoted))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |")
	require.Empty(t, mb.Data.FreeText, "the quoted block is not notes for the agent")
}

// The session is named after the branch at the first (analysis) run; a later title edit
// changes neither. Session state is kept while blocked and removed when the mailbox closes.
func TestSessionNameAndLifetime(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.failures["analysis.technical"] = "boom"
	b.deliver(assign("alice"))
	mb := b.advance()
	first := b.exec.jobs[0]
	require.Equal(t, phase.Analysis, first.Input.Phase)
	require.Equal(t, "agent/issue-1-export-the-monthly-report-as-csv", first.SessionName)

	b.deliver(forge.Event{Type: forge.EventIssueEdited, Sender: forge.User{Login: "alice"}, Title: "Export every report as XLSX"})
	b.deliver(comment("alice", "ok"))
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, "Export every report as XLSX", mb.Title)
	require.Equal(t, first.SessionName, b.exec.jobs[1].SessionName, "name stable after a title edit")
	require.Empty(t, b.exec.removedSessions, "kept while blocked")

	b.deliver(forge.Event{Type: forge.EventIssueClosed, Sender: forge.User{Login: "alice"}})
	mb = b.advance()
	require.Equal(t, mailbox.StateDone, mb.State)
	require.Equal(t, []int64{mb.ID}, b.exec.removedSessions, "removed when the mailbox closes")
}

func TestSessionSettingOff(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.machine = mailbox.NewMachine(mailbox.Config{SessionResume: func(repo string) bool { return repo != "acme/shop" }},
		b.store, map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}}, b.exec, b.clock.Now, nil)
	b.deliver(assign("alice"))
	b.advance()
	require.NotEmpty(t, b.exec.jobs)
	require.Empty(t, b.exec.jobs[0].SessionName, "setting off: no session name")
}

func TestStartCreatesTheLabelsMaintainersAdd(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	require.NotContains(t, b.fake.RepoLabels(repo), "ai::validate_plan")
	b.deliver(assign("alice"))
	b.advance()
	for _, l := range []string{"ai::validate_plan", "type::bug", "type::question", "status::done"} {
		require.Contains(t, b.fake.RepoLabels(repo), l)
	}
}

// Failed passes (the agent infrastructure down) are retried silently at first; the third in a
// row says so in the issue, once, with secrets censored.
func TestRepeatedFailedPassesAreReportedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.machine = mailbox.NewMachine(mailbox.Config{Redact: func(s string) string {
		return strings.ReplaceAll(s, "tok-s3cr3t", "[redacted]")
	}}, b.store, map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}}, b.exec, b.clock.Now, nil)
	b.deliver(assign("alice"))
	mb := b.advance() // questions asked
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	before := len(b.comments())
	boom := fmt.Errorf("dial docker with tok-s3cr3t: connection refused")
	for range 2 {
		b.machine.ReportFailure(context.Background(), mb.ID, "", boom)
	}
	require.Len(t, b.comments(), before, "two failures: silent")
	b.machine.ReportFailure(context.Background(), mb.ID, "", boom)
	require.Len(t, b.comments(), before+1)
	require.Contains(t, b.lastComment(), "I cannot go on for now: dial docker with [redacted]: connection refused")
	b.machine.ReportFailure(context.Background(), mb.ID, "", boom)
	require.Len(t, b.comments(), before+1, "once per streak")

	// A successful pass ends the streak; the next streak is reported again, in a new comment.
	b.deliver(comment("alice", "ok"))
	b.advance()
	n := len(b.comments())
	for range 3 {
		b.machine.ReportFailure(context.Background(), mb.ID, "", boom)
	}
	require.Len(t, b.comments(), n+1)
}

// A failed pass whose lease another worker took meanwhile reports nothing: the re-read mailbox
// is the new holder's, whose data it would overwrite and whose issue it would tell of a failure
// that is not its own.
func TestFailureOfADeposedPassIsNotReported(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.machine = mailbox.NewMachine(mailbox.Config{FailureStreak: 1}, b.store,
		map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}}, b.exec, b.clock.Now, nil)
	b.deliver(assign("alice"))
	mb := b.advance() // questions asked: a working state
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	ctx := context.Background()
	a, err := b.store.Claim(ctx, mb.ID, "replica-a/1", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, a)
	b.clock.Add(2 * time.Minute)
	got, err := b.store.Claim(ctx, mb.ID, "replica-b/1", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, got)
	before := len(b.comments())
	b.machine.ReportFailure(ctx, mb.ID, "replica-a/1", fmt.Errorf("database partition"))
	require.Len(t, b.comments(), before, "nothing said on the new holder's issue")
	now, err := b.store.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.Zero(t, now.Data.FailedPasses, "the new holder's data untouched")

	b.machine.ReportFailure(ctx, mb.ID, "replica-b/1", fmt.Errorf("docker down"))
	require.Len(t, b.comments(), before+1, "the holder's own failure is reported")
}

// A 404 of something other than the issue (a pipeline deleted while Alfred read its jobs, a
// downstream pipeline in another project) is a failed pass, not a gone issue: the mailbox
// stays where it is.
func TestNotFoundOfAnotherObjectKeepsTheMailbox(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	mb := b.toCI()
	b.fake.FailNextCall("CIStatus", fmt.Errorf("list failed jobs of pipeline 500 in %s: %w", repo, forge.ErrNotFound))
	b.deliver(forge.Event{Type: forge.EventPipeline, Target: forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		Pipeline: &forge.Pipeline{State: forge.CIFailed, SHA: mb.HeadSHA}})
	got, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.ErrorIs(t, b.machine.Advance(context.Background(), got), forge.ErrNotFound)
	got, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, got.State, "not cancelled: the issue is there")
	require.Nil(t, got.ClosedAt)
}

// Both forges answer 404 for a repository the bot's token can no longer see (the bot removed
// from the project, a group sync): the issue is not taken for deleted, neither by a pass nor by
// reconciliation, and the work in progress is not cancelled; when access comes back it goes on.
func TestLostAccessClosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
		if ref.Number == b.ref.Number || method == "Repository" {
			return fmt.Errorf("%s: 404 Project Not Found: %w", method, forge.ErrNotFound)
		}
		return nil
	})
	b.deliver(comment("alice", "q1: a"))
	mb, err := b.store.Find(t.Context(), b.ref)
	require.NoError(t, err)
	require.Error(t, b.machine.Advance(t.Context(), mb), "the pass fails, to be tried again")
	st := mailbox.NewReconciler(mailbox.ReconcilerConfig{}, b.store, b.store, b.bots, b.clock.Now, b.log).Pass(t.Context(), 0)
	require.Len(t, st, 1)
	require.ErrorIs(t, st[0].Err, forge.ErrNotFound, "reconciliation fails too, and derives nothing")
	require.Zero(t, st[0].Events)
	mb, err = b.store.Find(t.Context(), b.ref)
	require.NoError(t, err)
	require.True(t, mb.State.Working(), "not cancelled: %s", mb.State)
	require.Nil(t, mb.ClosedAt)

	b.fake.SetErrorHook(nil)
	b.clock.Add(time.Hour) // past the failed pass's backoff
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State, "access back: the answer is applied")
}
