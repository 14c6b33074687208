package mailbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// setupPG is setup on the PostgreSQL store, with the fake forge's clock at the machine's.
func setupPG(t testing.TB, labels ...string) *bundle {
	t.Helper()
	db, _ := pgtest.New(t)
	b := setupWith(t, guard{store: func(now func() time.Time) storetest.Store { return postgres.New(db, now) }}, labels...)
	b.fake.SetClock(b.clock.Now())
	return b
}

// reconcile makes one reconciliation pass and returns its stats for the one forge.
func (b *bundle) reconcile() mailbox.PassStats {
	b.t.Helper()
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{}, b.store, b.store, b.bots, b.clock.Now, b.log)
	st := r.Pass(context.Background(), 0)
	require.Len(b.t, st, 1)
	require.NoError(b.t, st[0].Err)
	return st[0]
}

// toValidation brings the issue to waiting_validation through deliveries, as Alfred up would.
func (b *bundle) toValidation() *mailbox.Mailbox {
	b.t.Helper()
	b.deliver(assign("alice"))
	require.Equal(b.t, mailbox.StateWaitingInfo, b.advance().State)
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(b.t, mailbox.StateWaitingValidation, mb.State)
	return mb
}

func (b *bundle) jobsOf(p phase.Phase) int {
	n := 0
	for _, j := range b.exec.jobs {
		if j.Input.Phase == p {
			n++
		}
	}
	return n
}

func TestReconcileMissedValidationLabel(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	require.Zero(t, b.reconcile().Events, "nothing missed yet")

	// Alfred is down: alice adds the label, the forge's webhook is lost.
	b.fake.SetIssueLabels(b.ref, "alice", append(b.fake.IssueLabels(b.ref), "ai::validate_plan")...)
	st := b.reconcile()
	require.Equal(t, 1, st.Events)
	mb := b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State, "the lifecycle continues")
	require.Contains(t, strings.Join(b.comments(), "\n"), "Plan validated by @alice.")
	require.Equal(t, 1, b.jobsOf(phase.Development))

	require.Zero(t, b.reconcile().Events, "the same difference is not stored twice")
	b.advance()
	b.requireUniqueMarkers()
	require.Equal(t, 1, b.jobsOf(phase.Development))
}

func TestReconcileMissedMerge(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb := b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	b.reconcile() // records the merge request as seen

	b.fake.MarkMerged(repo, mb.MRNumber) // the merge webhook is lost
	require.Equal(t, 1, b.reconcile().Events)
	mb = b.advance()
	require.Equal(t, mailbox.StateDone, mb.State)
	require.Equal(t, []string{"status::done"}, b.status())
}

func TestReconcileMissedAnswerAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)

	id := b.fake.AddComment(b.ref, "alice", "q1: b") // the comment webhook is lost
	require.Equal(t, 1, b.reconcile().Events)
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, "Semicolon", mb.Data.Decisions["q1"])
	technical := len(b.exec.jobs)

	// The delivery of the same comment arrives late: it must not act again.
	b.deliver(forge.Event{Type: forge.EventComment, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: "q1: b"}})
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, technical, len(b.exec.jobs), "no run for a comment applied already")
	require.Zero(t, b.reconcile().Events, "comments are read from where the last pass stopped")
	b.requireUniqueMarkers()
}

// TestReconcileWhileTheBotPostsItsQuestions: a reconciliation (or a poll) that reads the
// issue after the bot's question block reached the forge, but before Alfred recorded what it
// posted, or while an edit of the block is on its way, sees the block as Alfred wrote it: not
// an edit by the author, which would close the round with every default (the block as
// rendered ticks the defaults). The questions stay open until alice answers.
func TestReconcileWhileTheBotPostsItsQuestions(t *testing.T) {
	t.Parallel()
	var b *bundle
	passes := 0
	db, _ := pgtest.New(t)
	b = setupWith(t, guard{
		store: func(now func() time.Time) storetest.Store { return postgres.New(db, now) },
		wrap: func(f forge.Forge) forge.Forge {
			return midWrite{Forge: f, after: func() { passes++; b.reconcile() }}
		},
	}, "type::task")
	b.fake.SetClock(b.clock.Now())
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Positive(t, passes, "a reconciliation ran while the bot wrote its comments")
	for range 3 { // what those passes stored, if anything
		mb = b.advance()
	}
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the questions stay open: decisions %v", mb.Data.Decisions)
	require.Empty(t, mb.Data.Decisions)

	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, "Semicolon", mb.Data.Decisions["q1"])
	b.requireUniqueMarkers()
}

// midWrite is a forge on which, right after a comment is posted or edited and before the
// call returns to Alfred, after runs (a reconciliation pass reading the issue meanwhile).
type midWrite struct {
	forge.Forge
	after func()
}

func (m midWrite) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	id, err := m.Forge.Comment(ctx, ref, body)
	if err == nil {
		m.after()
	}
	return id, err
}

func (m midWrite) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	err := m.Forge.EditComment(ctx, ref, id, body)
	if err == nil {
		m.after()
	}
	return err
}

func TestReconcileMissedAssignment(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	// The repository's webhook reaches this Alfred (an earlier delivery); another repository's,
	// where the same bot account is assigned, does not: that one belongs to another installation.
	b.deliver(forge.Event{Type: forge.EventIssueOpened, Sender: forge.User{Login: "alice"}})
	b.fake.AddRepo("elsewhere/app", "main", "/nonexistent.git")
	other := b.fake.AddIssue("elsewhere/app", forgetest.SeedIssue{Title: "Not ours", Author: "alice"})
	b.fake.SetIssueAssignees(forge.IssueRef{Repo: "elsewhere/app", Number: other}, "alice", forgetest.BotLogin)
	n := b.fake.AddIssue(repo, forgetest.SeedIssue{Title: "Assigned while down", Author: "alice", Labels: []string{"type::task"}})
	fresh := forge.IssueRef{Forge: "gl", Repo: repo, Number: n}
	b.fake.SetIssueAssignees(fresh, "alice", forgetest.BotLogin)

	st := b.reconcile()
	require.Equal(t, 1, st.NewAssignments, "only in a repository whose webhooks reach this Alfred")
	mb, err := b.store.Find(context.Background(), fresh)
	require.NoError(t, err)
	require.NoError(t, b.machine.Advance(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), fresh)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Contains(t, b.fake.IssueComments(fresh)[0].Body, "Thanks @alice, I am on it")

	require.Zero(t, b.reconcile().NewAssignments, "a tracked issue is not found again")
}

// An Alfred that never got a delivery from a repository still finds an issue assigned to the bot
// there when the repository's webhook points at it, or when forges[].repositories lists it; a
// repository whose hook points at another URL is another installation's and is not touched.
func TestReconcileAssignmentInRepositoryFoundByItsHook(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	const hookURL = "https://alfred.example.org/webhooks/gl"
	assigned := func(repo string, admin bool, hooks ...string) forge.IssueRef {
		if repo != "acme/shop" {
			b.fake.AddRepo(repo, "main", "/nonexistent.git")
			b.fake.SetAccess(repo, "alice", true)
		}
		if admin {
			b.fake.SetAccessLevel(repo, forgetest.BotLogin, 40)
		}
		for _, u := range hooks {
			b.fake.AddHook(repo, forge.Hook{URL: u, ContentType: "json", Active: true, Events: []string{"issues", "note"}})
		}
		n := b.fake.AddIssue(repo, forgetest.SeedIssue{Title: "Assigned while down", Author: "alice", Labels: []string{"type::task"}})
		ref := forge.IssueRef{Forge: "gl", Repo: repo, Number: n}
		b.fake.SetIssueAssignees(ref, "alice", forgetest.BotLogin)
		return ref
	}
	hooked := assigned("acme/shop", true, "https://ci.example/hook", hookURL+"/")
	listed := assigned("acme/listed", false)
	other := assigned("elsewhere/app", true, "https://other-alfred.example.org/webhooks/gl")
	unreadable := assigned("elsewhere/private", false)
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Rediscover: time.Hour, Scopes: map[string]mailbox.Scope{
		"gl": {HookURL: hookURL, Repositories: []string{"ACME/listed"}}}}, b.store, b.store, b.bots, b.clock.Now, b.log)
	pass := func() mailbox.PassStats {
		t.Helper()
		st := r.Pass(context.Background(), 0)
		require.Len(t, st, 1)
		require.NoError(t, st[0].Err)
		return st[0]
	}
	hookReads := func() (n int) {
		for _, c := range b.fake.Calls() {
			if c.Method == "Hooks" {
				n++
			}
		}
		return n
	}
	touched := func(repo string) (calls []string) {
		for _, c := range b.fake.Calls() {
			if c.Repo == repo && c.Method != "Hooks" {
				calls = append(calls, c.Method)
			}
		}
		return calls
	}

	st := pass()
	require.Equal(t, 2, st.NewAssignments, "the hooked and the listed repository")
	require.Equal(t, 1, st.Discovered)
	require.Equal(t, 3, hookReads(), "the listed repository's hooks are not read")
	for _, ref := range []forge.IssueRef{hooked, listed} {
		mb, err := b.store.Find(context.Background(), ref)
		require.NoError(t, err, ref.String())
		require.NoError(t, b.machine.Advance(context.Background(), mb))
		require.Contains(t, b.fake.IssueComments(ref)[0].Body, "Thanks @alice, I am on it")
	}
	for _, ref := range []forge.IssueRef{other, unreadable} {
		_, err := b.store.Find(context.Background(), ref)
		require.ErrorIs(t, err, mailbox.ErrNotFound, ref.String())
		require.Empty(t, b.fake.IssueComments(ref), ref.String())
		require.Empty(t, touched(ref.Repo), "another installation's repository: its hooks read, nothing else")
	}

	// The next pass reads no hook again; once Rediscover has passed the search starts from the
	// beginning and the hooks are read again, so a hook set up after the assignment is found.
	b.clock.Add(5 * time.Minute)
	require.Zero(t, pass().NewAssignments)
	require.Equal(t, 3, hookReads(), "what the hooks said is kept")
	b.fake.AddHook(other.Repo, forge.Hook{URL: hookURL, ContentType: "json", Active: false})
	b.clock.Add(time.Hour)
	st = pass()
	require.Equal(t, 1, st.NewAssignments, "a disabled hook to this Alfred makes the repository its own")
	require.Equal(t, 5, hookReads())
	_, err := b.store.Find(context.Background(), other)
	require.NoError(t, err)
	_, err = b.store.Find(context.Background(), unreadable)
	require.ErrorIs(t, err, mailbox.ErrNotFound)
}

// A repository whose hooks cannot be read right now (the forge unavailable) does not hold up
// the assignments found elsewhere in the same pass; the next pass searches from the same time
// and finds it.
func TestReconcileHookReadFailureHoldsUpOnlyItsRepository(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	const hookURL = "https://alfred.example.org/webhooks/gl"
	b.fake.SetAccessLevel(repo, forgetest.BotLogin, 40)
	b.fake.AddHook(repo, forge.Hook{URL: hookURL, Active: true})
	b.fake.AddRepo("acme/listed", "main", "/nonexistent.git")
	b.fake.SetAccess("acme/listed", "alice", true)
	var refs []forge.IssueRef
	for _, r := range []string{repo, "acme/listed"} {
		n := b.fake.AddIssue(r, forgetest.SeedIssue{Title: "Assigned while down", Author: "alice"})
		refs = append(refs, forge.IssueRef{Forge: "gl", Repo: r, Number: n})
		b.fake.SetIssueAssignees(refs[len(refs)-1], "alice", forgetest.BotLogin)
	}
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Scopes: map[string]mailbox.Scope{
		"gl": {HookURL: hookURL, Repositories: []string{"acme/listed"}}}}, b.store, b.store, b.bots, b.clock.Now, b.log)
	b.fake.FailNextCall("Hooks", fmt.Errorf("list hooks: %w", forge.ErrUnavailable))

	st := r.Pass(context.Background(), 0)[0]
	require.ErrorIs(t, st.Err, forge.ErrUnavailable)
	require.Equal(t, 1, st.NewAssignments, "the listed repository's assignment is not held up")
	_, err := b.store.Find(context.Background(), refs[0])
	require.ErrorIs(t, err, mailbox.ErrNotFound)

	b.clock.Add(5 * time.Minute)
	st = r.Pass(context.Background(), 0)[0]
	require.NoError(t, st.Err)
	require.Equal(t, 1, st.NewAssignments, "found by the next pass")
	require.Equal(t, 1, st.Discovered)
	_, err = b.store.Find(context.Background(), refs[0])
	require.NoError(t, err)
}

// Forgejo sends byte-identical bodies for assign, unassign, assign within one second: the third
// delivery differs from the first only by its delivery id, and must count.
func TestAssignUnassignAssignWithIdenticalBodies(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	ctx := context.Background()
	for i, step := range []struct {
		body      string
		assignees []string
	}{{"assign", []string{forgetest.BotLogin}}, {"unassign", nil}, {"assign", []string{forgetest.BotLogin}}} {
		b.fake.SetIssueAssignees(b.ref, "alice", step.assignees...)
		dup, err := b.store.Deliver(ctx, forge.Event{Forge: "gl", Kind: forge.KindGitLab, Type: forge.EventAssignees,
			DeliveryID: fmt.Sprintf("delivery-%d", i), BodyHash: "body-" + step.body, Target: b.ref,
			Sender: forge.User{Login: "alice"}, AssigneesKnown: true, Assignees: step.assignees, ReceivedAt: b.clock.Now()})
		require.NoError(t, err)
		require.False(t, dup, "step %d", i)
	}
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the bot works on the issue")
	require.Contains(t, b.comments()[0], "Thanks @alice, I am on it")
}

func TestPendingUnassignBeforeRunStarts(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	delivered := false
	b.fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "Repository" && !delivered { // prepareRun: the run is about to start
			delivered = true
			b.fake.SetIssueAssignees(b.ref, "alice")
			b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "bob"}, AssigneesKnown: true})
		}
		return nil
	})
	b.deliver(assign("alice"))
	mb := b.advance()
	require.True(t, delivered)
	require.Equal(t, mailbox.StateCancelled, mb.State)
	require.Empty(t, b.exec.jobs, "the unassignment waiting in the inbox wins over the run")
}

func TestPendingUnassignAfterRunPostsNothing(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.exec.during = func(job phase.Job) {
		if job.Input.Phase == phase.Analysis {
			b.fake.SetIssueAssignees(b.ref, "bob")
			b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "bob"}, AssigneesKnown: true,
				Assignees: []string{"bob"}})
		}
	}
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateCancelled, mb.State)
	require.Len(t, b.exec.jobs, 1)
	for _, c := range b.comments() {
		require.NotContains(t, c, "Which separator?", "no question block after the cancel")
	}
	require.NotContains(t, b.fake.IssueAssignees(b.ref), "alice", "the author is not handed the turn")
}

func TestPoisonEventIsSetAsideAndTheRestGoesOn(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	// PostgreSQL refuses a NUL byte in a text column: the mailbox cannot be saved with it.
	b.deliver(forge.Event{Type: forge.EventIssueEdited, Sender: forge.User{Login: "alice"}, Title: "bad\x00title"})
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	ctx := context.Background()
	var err error
	for range 4 {
		mb, ferr := b.store.Find(ctx, b.ref)
		require.NoError(t, ferr)
		err = b.machine.Advance(ctx, mb)
		require.Error(t, err, "the event fails below the limit")
	}
	mb := b.advance() // the fifth failure sets it aside
	require.Equal(t, mailbox.StateInCI, mb.State, "the mailbox goes on with the rest")
	require.Contains(t, err.Error(), "save mailbox")
	var notes []string
	for _, c := range b.comments() {
		if strings.Contains(c, "I could not process an update of this issue") {
			notes = append(notes, c)
		}
	}
	require.Len(t, notes, 1, "said once, in plain words")
	require.Contains(t, notes[0], "issue_edited by @alice")
	b.advance()
	b.requireUniqueMarkers()
}

// TestEachClaimHoldsItsOwnLease: two workers of one process must not share a lease's name.
// Otherwise a worker whose lease expired while it worked (the database unreachable longer than
// the TTL) extends the lease another worker of the same process has taken since, as if it were
// its own, and its release frees that one's: two passes on one mailbox at once. Each claim's
// lease is named "<owner>/<claim number>": the runs of two passes see two names.
func TestEachClaimHoldsItsOwnLease(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	var owners []string
	b.exec.during = func(job phase.Job) {
		mb, err := b.store.Find(context.Background(), b.ref)
		require.NoError(t, err)
		require.NotNil(t, mb.LeaseOwner)
		owners = append(owners, *mb.LeaseOwner)
	}
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", LeaseTTL: time.Minute}, b.store, b.machine, b.log)
	drain := func() {
		for {
			did, err := w.Once(context.Background())
			require.NoError(t, err)
			if !did {
				return
			}
		}
	}
	b.deliver(assign("alice")) // one pass: the analyses
	drain()
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")}) // another: the development
	drain()
	require.GreaterOrEqual(t, len(owners), 2, "runs in two passes")
	require.NotEqual(t, owners[0], owners[len(owners)-1], "two claims, two lease names")
	for _, o := range owners {
		require.Regexp(t, `^w/\d+$`, o)
	}
}

func TestPassThatKillsTheProcessBlocksAfterLimit(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.exec.during = func(job phase.Job) { panic("agent adapter bug") }
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", LeaseTTL: time.Minute}, b.store, b.machine, b.log)
	b.deliver(assign("alice"))
	ctx := context.Background()
	crashes := 0
	for range 10 {
		panicked := func() (p bool) {
			defer func() { p = recover() != nil }() // the process dies: no release of the lease
			_, err := w.Once(ctx)
			require.NoError(t, err)
			return false
		}()
		if !panicked {
			break
		}
		crashes++
		b.clock.Add(2 * time.Minute) // the lease of the dead process expires
	}
	require.Equal(t, 5, crashes, "after the limit the mailbox blocks instead of crash-looping")
	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "stopped Alfred itself")
	require.Equal(t, []string{"status::blocked"}, b.status())
}

func TestForgeErrorAfterRunDoesNotRunTheAgentAgain(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	b.fake.FailNextCall("CreateMergeRequest", fmt.Errorf("gitlab: open merge request: HTTP 502: %w", forge.ErrUnavailable))
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.ErrorIs(t, b.machine.Advance(context.Background(), mb), forge.ErrUnavailable)
	require.Equal(t, 1, b.jobsOf(phase.Development))

	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.NotZero(t, mb.MRNumber)
	require.Equal(t, 1, b.jobsOf(phase.Development), "only the remaining effects are retried, never the agent")
	require.Len(t, b.fake.MergeRequests(repo), 1)
	b.requireUniqueMarkers()
}

func TestCrashBetweenPushAndMergeRequest(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	crashed := false
	b.fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "CreateMergeRequest" && !crashed {
			crashed = true
			panic("SIGKILL between the push and the merge request")
		}
		return nil
	})
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	func() {
		defer func() { require.NotNil(t, recover()) }()
		b.advance()
	}()
	require.Equal(t, 1, b.jobsOf(phase.Development))

	// A new process (a new machine on the same store and forge) takes over.
	restarted := mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute}, b.store, b.bots, b.exec, b.clock.Now, b.log)
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.NoError(t, restarted.Advance(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, 1, b.jobsOf(phase.Development), "the agent ran once")
	require.Len(t, b.fake.MergeRequests(repo), 1, "one merge request")
	b.requireUniqueMarkers()
}

func TestRetriedAnalysisPostsTheQuestionsItStored(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	failed := false
	b.fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "Comment" && !failed && len(b.exec.jobs) == 1 { // the question block, after the run
			failed = true
			return fmt.Errorf("gitlab: post note: HTTP 503: %w", forge.ErrUnavailable)
		}
		return nil
	})
	b.deliver(assign("alice"))
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.ErrorIs(t, b.machine.Advance(context.Background(), mb), forge.ErrUnavailable)
	require.True(t, failed)

	b.exec.results["analysis.functional"].Questions[0].Title = "A different question from a second run?"
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Equal(t, 1, b.jobsOf(phase.Analysis), "the analysis ran once")
	require.Contains(t, b.lastComment(), "Which separator?", "the stored questions, not new ones")
	b.requireUniqueMarkers()
}

// The process dies after the analysis posted its questions and before it recorded that: the
// answer that comes meanwhile waits for the stored outcome to be acted on, and then answers.
func TestAnswerWaitsForTheStoredOutcomeItAnswers(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.deliver(assign("alice"))
	crashed := false
	b.fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "SetAssignees" && !crashed { // the author's turn, right after the questions
			crashed = true
			panic("SIGKILL after the questions were posted")
		}
		return nil
	})
	func() {
		defer func() { require.NotNil(t, recover()) }()
		b.advance()
	}()
	require.Contains(t, b.lastComment(), "Which separator?", "the questions are on the forge")
	b.deliver(comment("alice", "q1: b"))

	restarted := mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute}, b.store, b.bots, b.exec, b.clock.Now, b.log)
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.NoError(t, restarted.Advance(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateWaitingValidation, mb.State, "the answer was not lost")
	require.Equal(t, "Semicolon", mb.Data.Decisions["q1"])
	require.Equal(t, 1, b.jobsOf(phase.Analysis)-1, "one functional and one technical analysis")
	b.requireUniqueMarkers()
}

// The process dies after posting the plan and before recording it; alice validates meanwhile.
// Acting on the stored plan re-reads the issue's labels: that must not swallow her label.
func TestValidationDuringARecoveredPlanIsNotSwallowed(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.deliver(comment("alice", "q1: b"))
	crashed := false
	b.fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "SetLabels" && !crashed && strings.Contains(b.commentsOf(b.ref), "Technical plan") {
			crashed = true
			panic("SIGKILL after the plan was posted")
		}
		return nil
	})
	func() {
		defer func() { require.NotNil(t, recover()) }()
		b.advance()
	}()
	labels := append(b.fake.IssueLabels(b.ref), "ai::validate_plan")
	b.fake.SetIssueLabels(b.ref, "alice", labels...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true, Labels: labels})

	restarted := mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute}, b.store, b.bots, b.exec, b.clock.Now, b.log)
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.NoError(t, restarted.Advance(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, mb.State, "the validation was applied")
	require.Equal(t, 1, b.jobsOf(phase.Development))
	b.requireUniqueMarkers()
}

// A pass cut right after the development's outcome took the mailbox to in_ci (the forge's CI
// read fails, or the process stops: a replica handed over with SIGTERM) leaves the mailbox
// due: the next pass, on any replica, polls the CI. The mailbox was saved mid-pass with the
// outcome; its wake time must not be "never".
func TestPassCutAfterEnteringCILeavesTheMailboxDue(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	b.fake.FailNextCall("CIStatus", fmt.Errorf("forgejo: commit status: HTTP 502: %w", forge.ErrUnavailable))
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.ErrorIs(t, b.machine.Advance(context.Background(), mb), forge.ErrUnavailable)
	require.Equal(t, 1, b.jobsOf(phase.Development))

	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, mb.State, "the outcome was saved")
	require.NotNil(t, mb.WakeAt, "a mailbox in CI without a wake time is never polled again")
	require.False(t, mb.WakeAt.After(b.clock.Now()), "due at once")
	leased, err := b.store.Lease(context.Background(), "replica-b", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, leased, "another worker takes the mailbox")
	require.Equal(t, mb.ID, leased.ID)
}

// A pass whose lease changed hands while it worked (its heartbeats failed longer than the TTL:
// a database outage, a paused process) ends at its first save, which the store refuses: what
// it decided from its old read is dropped, and it is not a failure of the mailbox's, so
// nothing is counted or said on the mailbox the other replica now holds.
func TestPassWhoseLeaseChangedHandsSavesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	ctx := context.Background()
	b.exec.during = func(job phase.Job) {
		b.clock.Add(2 * time.Minute) // A's lease expires; replica B claims the mailbox
		mb, err := b.store.Find(ctx, b.ref)
		require.NoError(t, err)
		got, err := b.store.Claim(ctx, mb.ID, "replica-b/1", time.Minute)
		require.NoError(t, err)
		require.NotNil(t, got)
	}
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", LeaseTTL: time.Minute}, b.store, b.machine, b.log)
	b.deliver(assign("alice"))
	did, err := w.Once(ctx)
	require.True(t, did)
	require.ErrorIs(t, err, mailbox.ErrLeaseLost)

	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateFunctionalAnalysis, mb.State,
		"what A saved while it held the lease stays; what it decided from the run after is dropped")
	require.Zero(t, mb.Data.FailedPasses, "a lost lease is not a failed pass of the mailbox")
	require.NotNil(t, mb.LeaseOwner)
	require.Equal(t, "replica-b/1", *mb.LeaseOwner, "B's lease is untouched")
	for _, c := range b.comments() {
		require.NotContains(t, c, "I cannot go on")
	}
}

// batchReconciler returns a Reconciler of b's forge with a batch of two, and a pass of it that
// must not fail; the fake forge's clock is set to b's.
func batchReconciler(t *testing.T, b *bundle) (*mailbox.Reconciler, func() mailbox.PassStats) {
	t.Helper()
	b.fake.SetClock(b.clock.Now())
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Batch: 2}, b.store, b.store, b.bots, b.clock.Now, b.log)
	return r, func() mailbox.PassStats {
		t.Helper()
		st := r.Pass(context.Background(), 0)
		require.Len(t, st, 1)
		require.NoError(t, st[0].Err)
		return st[0]
	}
}

// seedAssigned adds an issue of the repository that by assigned to the bot while no webhook
// reached Alfred, and returns it.
func (b *bundle) seedAssigned(title, by string) forge.IssueRef {
	n := b.fake.AddIssue(repo, forgetest.SeedIssue{Title: title, Author: "alice", Labels: []string{"type::task"}})
	ref := forge.IssueRef{Forge: "gl", Repo: repo, Number: n}
	b.fake.SetIssueAssignees(ref, by, forgetest.BotLogin)
	return ref
}

// The search for missed assignments derives at most reconcile_batch of them a pass, but the
// issues Alfred already works on do not count: a bot with more assigned issues than the batch,
// all updated after the one assigned while Alfred was down, still finds that one. Missed
// assignments beyond the batch are found by the next pass, although it searches only what
// changed since the last.
func TestReconcileBatchCountsOnlyMissedAssignments(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	ctx := context.Background()
	_, pass := batchReconciler(t, b)
	require.Zero(t, pass().NewAssignments, "the search from the beginning: nothing missed yet")
	b.clock.Add(time.Minute) // the next passes search only what changed since this one
	b.fake.SetClock(b.clock.Now())
	var missed []forge.IssueRef
	for i := range 3 {
		missed = append(missed, b.seedAssigned(fmt.Sprintf("Assigned while down %d", i), "alice"))
	}
	for i := range 3 { // assigned later, delivered and worked on
		ref := b.seedAssigned(fmt.Sprintf("Worked on %d", i), "alice")
		ev := assign("alice")
		ev.Target = ref
		b.deliver(ev)
		mb, err := b.store.Find(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, b.machine.Advance(ctx, mb))
	}
	b.clock.Add(10 * time.Minute) // past the search's minute of overlap
	// work does what the workers do between two passes.
	work := func() {
		t.Helper()
		for _, ref := range missed {
			if mb, err := b.store.Find(ctx, ref); err == nil {
				require.NoError(t, b.machine.Advance(ctx, mb))
			}
		}
	}
	require.Equal(t, 2, pass().NewAssignments, "the batch: two of the three missed")
	work()
	require.Equal(t, 1, pass().NewAssignments, "the third, by the next pass")
	work()
	require.Zero(t, pass().NewAssignments)
	for _, ref := range missed {
		mb, err := b.store.Find(ctx, ref)
		require.NoError(t, err, "%s", ref)
		require.Equal(t, mailbox.StateWaitingInfo, mb.State, "%s", ref)
	}
}

// claimOnFirstSave is a store on which another replica claims the mailbox (its holder's lease
// expired) just before the first SaveProcessed.
type claimOnFirstSave struct {
	*storetest.SaveRecorder
	once  sync.Once
	claim func()
}

func (s *claimOnFirstSave) SaveProcessed(ctx context.Context, mb *mailbox.Mailbox, done []mailbox.Processed) error {
	s.once.Do(s.claim)
	return s.SaveRecorder.SaveProcessed(ctx, mb, done)
}

// A pass's shared commit of several events refused because the lease changed hands ends the
// pass: it neither reads the mailbox again (which would take the new holder's lease for its
// own) and applies the events one by one.
func TestRefusedSharedCommitEndsThePass(t *testing.T) {
	t.Parallel()
	var st *claimOnFirstSave
	var b *bundle
	b = setupWith(t, guard{store: func(now func() time.Time) storetest.Store {
		st = &claimOnFirstSave{SaveRecorder: &storetest.SaveRecorder{Store: mailboxtest.NewStore(now)}}
		return st
	}})
	ctx := context.Background()
	st.claim = func() {
		b.clock.Add(2 * time.Minute)
		mb, err := st.SaveRecorder.Store.Find(ctx, b.ref)
		require.NoError(t, err)
		got, err := st.SaveRecorder.Store.Claim(ctx, mb.ID, "replica-b/1", time.Minute)
		require.NoError(t, err)
		require.NotNil(t, got)
	}
	b.deliver(comment("alice", "one"))
	b.deliver(comment("alice", "two"))
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", LeaseTTL: time.Minute}, st, b.machine, b.log)
	did, err := w.Once(ctx)
	require.True(t, did)
	require.ErrorIs(t, err, mailbox.ErrLeaseLost)
	mb, err := st.SaveRecorder.Store.Find(ctx, b.ref)
	require.NoError(t, err)
	require.Equal(t, "replica-b/1", *mb.LeaseOwner)
	require.Empty(t, st.Commits(mb.ID), "nothing committed under the other replica's lease")
	pending, err := st.SaveRecorder.Store.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, pending, 2, "both events left to the holder")
}

// Issues assigned to the bot that stay untracked for good (the assignment refused: mallory may
// not write; likewise a mailbox cancelled with the bot still assigned) are derived once, then
// left out until they change: they never fill the batch in front of an older missed
// assignment, and the search moves on.
func TestReconcileUntrackedAssignmentsDoNotFillTheBatch(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	ctx := context.Background()
	r, pass := batchReconciler(t, b)
	pass()
	b.clock.Add(time.Minute)
	b.fake.SetClock(b.clock.Now())
	missed := b.seedAssigned("Assigned while down", "alice")
	var refused []forge.IssueRef
	for i := range 3 {
		b.clock.Add(time.Minute)
		b.fake.SetClock(b.clock.Now())
		ref := b.seedAssigned(fmt.Sprintf("Refused %d", i), "mallory")
		refused = append(refused, ref)
		ev := assign("mallory")
		ev.Target = ref
		b.deliver(ev)
		mb, err := b.store.Find(ctx, ref)
		require.NoError(t, err)
		require.NoError(t, b.machine.Advance(ctx, mb))
	}
	b.clock.Add(10 * time.Minute)
	for range 3 {
		pass()
		if mb, err := b.store.Find(ctx, missed); err == nil {
			require.NoError(t, b.machine.Advance(ctx, mb))
		}
		b.clock.Add(10 * time.Minute)
	}
	mb, err := b.store.Find(ctx, missed)
	require.NoError(t, err, "the missed assignment behind them is found")
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	histories := func() (n int) {
		for _, c := range b.fake.Calls() {
			if c.Method == "Activity" {
				n++
			}
		}
		return n
	}
	before := histories()
	require.Zero(t, pass().NewAssignments)
	require.Equal(t, before, histories(), "nothing derived again: no history read")

	// Unassigned, they are forgotten by the next search from the beginning (and the found one,
	// tracked now, by any search that lists it).
	require.GreaterOrEqual(t, r.Derived("gl"), 3, "the three refused are remembered")
	for _, ref := range refused {
		b.fake.SetIssueAssignees(ref, "alice", "alice")
	}
	b.clock.Add(2 * time.Hour) // Rediscover: the search starts from the beginning
	pass()
	require.Zero(t, r.Derived("gl"))
}

// claimAfterFifthFail is a PostgreSQL store on which another replica claims the mailbox right
// after the fifth failed attempt is counted.
type claimAfterFifthFail struct {
	storetest.Store
	n     int
	claim func()
}

func (s *claimAfterFifthFail) FailEvents(ctx context.Context, ids []int64, errText string, max int) (int, error) {
	s.n++
	n, err := s.Store.FailEvents(ctx, ids, errText, max)
	if s.n == 5 {
		s.claim()
	}
	return n, err
}

// An event that fails PoisonAttempts times is set aside and the issue says so, whatever
// happens to the lease right after: the event is either still pending for the new holder or
// set aside and said, never set aside unsaid.
func TestSetAsideIsSaidWhenTheLeaseGoesRightAfter(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	var st *claimAfterFifthFail
	b := setupWith(t, guard{store: func(now func() time.Time) storetest.Store {
		st = &claimAfterFifthFail{Store: postgres.New(db, now)}
		return st
	}}, "type::task")
	b.fake.SetClock(b.clock.Now())
	ctx := context.Background()
	st.claim = func() {
		mb, err := st.Store.Find(ctx, b.ref)
		require.NoError(t, err)
		got, err := st.Store.Claim(ctx, mb.ID, "replica-b/1", time.Minute)
		require.NoError(t, err)
		require.NotNil(t, got)
	}
	b.toValidation()
	b.deliver(forge.Event{Type: forge.EventIssueEdited, Sender: forge.User{Login: "alice"}, Title: "bad\x00title"})
	var err error
	for range 5 {
		mb, ferr := b.store.Find(ctx, b.ref)
		require.NoError(t, ferr)
		err = b.machine.Advance(ctx, mb)
	}
	_ = err
	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	pending, err := b.store.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	notes := 0
	for _, c := range b.comments() {
		if strings.Contains(c, "I could not process an update of this issue") {
			notes++
		}
	}
	require.Equal(t, 1, notes+len(pending), "either still pending for the holder, or said")
}

// extendLost is a store on which every heartbeat finds the lease lost (it expired during a
// database outage longer than the TTL).
type extendLost struct{ storetest.Store }

func (extendLost) Extend(context.Context, int64, string, time.Duration) error {
	return mailbox.ErrLeaseLost
}

// A pass whose lease is lost while its run's agent works leaves the run as a shutdown does:
// the container goes on (the run's context ends with phase.ErrDetach, never a plain cancel that
// stops it) and the run stays running, for whoever holds the mailbox next to reattach.
func TestLostLeaseDetachesTheRun(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{store: func(now func() time.Time) storetest.Store {
		return extendLost{mailboxtest.NewStore(now)}
	}}, "type::task")
	b.exec.block = make(chan struct{}) // the agent works until its context ends
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", LeaseTTL: 300 * time.Millisecond}, b.store, b.machine, b.log)
	b.deliver(assign("alice"))
	ctx := context.Background()
	for { // the event pass, then the run pass
		did, err := w.Once(ctx)
		if errors.Is(err, mailbox.ErrLeaseLost) {
			break
		}
		require.NoError(t, err)
		require.True(t, did, "the run pass ended without losing its lease")
	}
	b.exec.mu.Lock()
	cause := b.exec.cause
	b.exec.mu.Unlock()
	require.ErrorIs(t, cause, phase.ErrDetach, "the run is left running, not stopped")
	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	runs, err := b.store.RunningRuns(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, runs, 1, "the run stays running for the next holder to reattach")
}

// A run another worker recovered while this pass ran it (this pass's lease expired and the
// mailbox was claimed, its container reattached and collected there) is that worker's to act
// on: the pass acts on nothing of its own copy of the outcome (no question asked), as a lost
// lease.
func TestRunRecoveredElsewhereIsNotActedOn(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	ctx := context.Background()
	b.exec.during = func(job phase.Job) {
		runs, err := b.store.RunningRuns(ctx, job.MailboxID)
		require.NoError(t, err)
		require.Len(t, runs, 1)
		r := runs[0]
		r.Status, r.Outcome, r.Applied = mailbox.RunInterrupted, "recovered by replica-b", true
		changed, err := b.store.FinishRecoveredRun(ctx, &r)
		require.NoError(t, err)
		require.True(t, changed)
	}
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", LeaseTTL: time.Minute}, b.store, b.machine, b.log)
	b.deliver(assign("alice"))
	before := len(b.comments())
	var err error
	for range 3 {
		if _, err = w.Once(ctx); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, mailbox.ErrLeaseLost)
	for _, c := range b.comments()[before:] {
		require.NotContains(t, c, "Which separator?", "the questions of an outcome another worker holds were not asked")
	}
}
