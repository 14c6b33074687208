package mailbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// rebuildConfig is the machine configuration setupWith gives the machine (the rebuild reads
// its labels and CI wait).
var rebuildConfig = mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute}

// loseStore replaces the bundle's store by an empty PostgreSQL schema (the store deleted) and
// the machine by one on it, and rebuilds the mailboxes from the forge; it returns the stats.
func (b *bundle) loseStore() mailbox.RebuildStats {
	b.t.Helper()
	b.clock.Add(time.Hour) // Alfred was down for a while
	db, _ := pgtest.New(b.t)
	b.store = postgres.New(db, b.clock.Now)
	b.machine = mailbox.NewMachine(rebuildConfig, b.store, b.bots, b.exec, b.clock.Now, b.log)
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Scopes: map[string]mailbox.Scope{"gl": {Repositories: []string{repo}}}},
		b.store, b.store, b.bots, b.clock.Now, b.log)
	first, err := r.RebuildIfEmpty(context.Background(), b.store, rebuildConfig)
	require.NoError(b.t, err)
	require.Len(b.t, first, 1, "the store was empty")
	again, err := r.RebuildIfEmpty(context.Background(), b.store, rebuildConfig)
	require.NoError(b.t, err)
	require.Nil(b.t, again, "the store is not empty any more")
	st, err := r.Rebuild(context.Background(), b.store, rebuildConfig)
	require.NoError(b.t, err)
	require.Len(b.t, st, 1)
	require.Zero(b.t, st[0].Rebuilt, "a second rebuild stores nothing: it is idempotent")
	require.Equal(b.t, 1, st[0].Existing)
	return first[0]
}

// requireOncePerPhase fails when a phase (but ci_fix, which may run again for a new failure)
// ran more than once over the whole test, before and after the store was lost.
func (b *bundle) requireOncePerPhase() {
	b.t.Helper()
	seen := map[string]bool{}
	for _, j := range b.exec.jobs {
		if j.Input.Phase == phase.CIFix {
			continue
		}
		key := j.Input.Key
		require.False(b.t, seen[key], "the %s phase ran twice", key)
		seen[key] = true
	}
}

// toDone validates nothing: from in_ci, CI passes, the merge request is merged while Alfred is
// down (reconciliation catches it), and the mailbox is done.
func (b *bundle) fromCIToDone(mb *mailbox.Mailbox) {
	b.t.Helper()
	require.Equal(b.t, mailbox.StateInCI, mb.State)
	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CISuccess})
	b.clock.Add(2 * time.Minute)
	mb = b.advance()
	require.Equal(b.t, mailbox.StateInReview, mb.State)
	b.fake.MarkMerged(repo, mb.MRNumber)
	require.Equal(b.t, 1, b.reconcile().Events)
	mb = b.advance()
	require.Equal(b.t, mailbox.StateDone, mb.State)
	require.Equal(b.t, []string{"status::done"}, b.status())
}

func TestRebuildWhileQuestionsAreOpen(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	comments := len(b.comments())
	// While Alfred has no store, alice answers.
	b.fake.AddComment(b.ref, "alice", "q1: b")
	comments++

	st := b.loseStore()
	require.Equal(t, 1, st.Rebuilt)
	require.Equal(t, map[mailbox.State]int{mailbox.StateWaitingInfo: 1}, st.States)
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the rebuilt mailbox waits for the same answers")
	require.Len(t, b.comments(), comments, "nothing is posted again, nothing is asked again")
	qs, err := b.store.Questions(context.Background(), mb.ID, mb.Data.Round)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, "Which separator?", qs[0].Title)
	require.Equal(t, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), qs[0].DeadlineAt.UTC(), "the deadline the block announced")

	// Reconciliation reads the reply written after the bot's last comment.
	require.Equal(t, 1, b.reconcile().Events)
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, "Semicolon", mb.Data.Decisions["q1"])
	answered := b.comments()[1]
	require.Contains(t, answered, "- [x] **b. Semicolon** — Excel in Europe", "the block is edited in place")
	require.Contains(t, answered, "**Answered by @alice.**")
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, b.fake.IssueBody(b.ref), "You want a CSV export of the monthly report.", "the understanding is read back from the block")

	b.fake.SetIssueLabels(b.ref, "alice", append(b.fake.IssueLabels(b.ref), "ai::validate_plan")...)
	require.Equal(t, 1, b.reconcile().Events)
	b.fromCIToDone(b.advance())
	b.requireUniqueMarkers()
	b.requireOncePerPhase()
}

func TestRebuildWhileTheQuestionBlockIsTicked(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)

	// alice ticks option b in the block while Alfred has no store: her edit, not the bot's.
	block := b.fake.IssueComments(b.ref)[1]
	ticked := strings.Replace(block.Body, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	require.NotEqual(t, block.Body, ticked)
	require.NoError(t, b.fake.EditComment(context.Background(), b.ref, block.ID, ticked))
	b.loseStore()
	require.Equal(t, 1, b.reconcile().Events)
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, "Semicolon", mb.Data.Decisions["q1"])
	b.requireUniqueMarkers()
	b.requireOncePerPhase()
}

func TestRebuildWhileTheTypeIsAsked(t *testing.T) {
	t.Parallel()
	b := setupPG(t) // no type label
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	comments := len(b.comments())
	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateWaitingType: 1}, st.States)
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	require.Len(t, b.comments(), comments)

	b.fake.AddComment(b.ref, "alice", "q1: task")
	require.Equal(t, 1, b.reconcile().Events)
	mb := b.advance()
	require.Equal(t, "task", mb.Type)
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the functional analysis asked its questions")
	b.requireUniqueMarkers()
	b.requireOncePerPhase()
}

func TestRebuildWhileThePlanWaitsForValidation(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	comments := len(b.comments())
	// The validation label added while Alfred has no store is acted on once.
	b.fake.SetIssueLabels(b.ref, "alice", append(b.fake.IssueLabels(b.ref), "ai::validate_plan")...)

	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateWaitingValidation: 1}, st.States)
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, "1. Add an export endpoint.\n2. Add a button.", mb.Data.Plan)
	require.Len(t, b.comments(), comments)

	require.Equal(t, 1, b.reconcile().Events)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Contains(t, strings.Join(b.comments(), "\n"), "Plan validated by @alice.")
	dev := b.exec.jobs[len(b.exec.jobs)-1]
	require.Equal(t, phase.Development, dev.Input.Phase)
	require.Equal(t, "1. Add an export endpoint.\n2. Add a button.", dev.Input.Plan)
	require.Equal(t, "Semicolon", dev.Input.Decisions["q1"], "the decisions are read back from the description")
	b.fromCIToDone(mb)
	b.requireUniqueMarkers()
	b.requireOncePerPhase()
}

func TestRebuildInCI(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	before := b.toCI()
	comments := len(b.comments())

	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateInCI: 1}, st.States)
	mb := b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, before.MRNumber, mb.MRNumber)
	require.Equal(t, before.HeadSHA, mb.HeadSHA)
	require.Equal(t, before.Branch, mb.Branch)
	require.Len(t, b.comments(), comments)

	// CI fails: one ci_fix, then green, merged, done.
	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL: TestExport"})
	b.clock.Add(2 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.NotEqual(t, before.HeadSHA, mb.HeadSHA)
	require.Equal(t, 1, b.jobsOf(phase.CIFix))
	require.Equal(t, 1, mb.Data.CIAttempts)
	b.fromCIToDone(mb)
	b.requireUniqueMarkers()
	b.requireOncePerPhase()
	require.Equal(t, 1, b.jobsOf(phase.Development))
}

func TestRebuildInReview(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	mb := b.toCI()
	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CISuccess})
	b.clock.Add(2 * time.Minute)
	require.Equal(t, mailbox.StateInReview, b.advance().State)
	comments := len(b.comments())

	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateInReview: 1}, st.States)
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Len(t, b.comments(), comments)

	b.fake.MarkMerged(repo, mb.MRNumber) // merged while Alfred had no store
	require.Equal(t, 1, b.reconcile().Events)
	mb = b.advance()
	require.Equal(t, mailbox.StateDone, mb.State)
	require.Equal(t, []string{"status::done"}, b.status())
	b.requireUniqueMarkers()
	b.requireOncePerPhase()
}

func TestRebuildSkipsIssuesWithoutAlfredsMarks(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	// Assigned while Alfred had no store and never seen: no status label, no marked comment.
	b.fake.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin)
	db, _ := pgtest.New(t)
	store := postgres.New(db, b.clock.Now)
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Scopes: map[string]mailbox.Scope{"gl": {Repositories: []string{repo}}}},
		store, store, b.bots, b.clock.Now, b.log)
	st, err := r.Rebuild(context.Background(), store, rebuildConfig)
	require.NoError(t, err)
	require.Equal(t, 1, st[0].Issues)
	require.Equal(t, 1, st[0].Skipped, "a new assignment is reconciliation's to start")
	empty, err := store.Empty(context.Background())
	require.NoError(t, err)
	require.True(t, empty)
}

func TestRebuildWhileBlocked(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	b.exec.failures["development"] = "agent wrote no result"
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	require.Equal(t, mailbox.StateBlocked, b.advance().State)
	delete(b.exec.failures, "development")
	// While Alfred has no store, alice asks for a retry.
	b.fake.AddComment(b.ref, "alice", "retry")

	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateBlocked: 1}, st.States)
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, mailbox.StateInDevelopment, mb.Data.BlockedFrom, "read from the block comment's key")
	require.Equal(t, 1, mb.Data.Blocks)

	require.Equal(t, 1, b.reconcile().Events)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State, "the retry resumes the development")
	require.Equal(t, 2, b.jobsOf(phase.Development), "the failed run and the retried one")
	require.Equal(t, 2, b.jobsOf(phase.Analysis), "the functional and the technical analysis, once each")
	b.fromCIToDone(mb)
	b.requireUniqueMarkers()
}

func TestRebuildWithAnUnreadableQuestionBlockBlocks(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	// A human rewrote the question block: it cannot be read back.
	block := b.fake.IssueComments(b.ref)[1]
	key, kind, ok := mailbox.ParseMarker(block.Body)
	require.True(t, ok)
	require.NoError(t, b.fake.EditComment(context.Background(), b.ref, block.ID, mailbox.Marker(key, kind)+"\nnever mind"))
	comments := len(b.comments())

	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateBlocked: 1}, st.States)
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, mb.Data.Blocked, "the question block could not be read back")
	b.reconcile()
	b.advance()
	require.Len(t, b.comments(), comments, "blocked: nothing posted, nothing asked, no new acknowledgement")

	b.fake.AddComment(b.ref, "alice", "retry")
	require.Equal(t, 1, b.reconcile().Events)
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the retry runs the functional analysis again, which asks anew")
	b.requireUniqueMarkers()
}

func TestRebuildWhileAFixWasDue(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	mb := b.toCI()
	// CI failed and the ci_fix was due (status::in_development) when the store was lost.
	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL: TestExport"})
	require.NoError(t, b.fake.SetLabels(context.Background(), b.ref, []string{"status::in_development"}, []string{"status::in_ci"}))

	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateInCI: 1}, st.States, "with a merge request: in CI, whose poll finds the failure")
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, 1, b.jobsOf(phase.CIFix), "the CI poll found the failure and ran the fix once")
	b.fromCIToDone(mb)
	b.requireUniqueMarkers()
	b.requireOncePerPhase()
}

func TestRebuildAfterTheAcknowledgementBeforeTheLabel(t *testing.T) {
	t.Parallel()
	b := setupPG(t) // no type label
	// The pass that acknowledged stopped before it wrote the status label.
	b.fake.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin)
	ack := mailbox.Marker("ack-1", "ack") + "\nThanks @alice, I am on it. You can follow where I am in the `status::` label of this issue."
	_, err := b.fake.Comment(context.Background(), b.ref, ack)
	require.NoError(t, err)

	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateIdle: 1}, st.States)
	require.Equal(t, 1, b.reconcile().NewAssignments, "reconciliation starts it as an assignment")
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingType, mb.State)
	require.Len(t, b.comments(), 2, "the acknowledgement is kept, not posted twice; then the type question")
	require.Equal(t, ack, b.comments()[0])
	b.requireUniqueMarkers()
}

// A status label a non-writer set while Alfred's store was lost is not taken as state: the
// label history shows who added it (mallory, a Reporter), so the rebuild does not start the
// development the label names.
func TestRebuildIgnoresAStatusLabelSetByANonWriter(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	labels := slices.DeleteFunc(b.fake.IssueLabels(b.ref), func(l string) bool { return strings.HasPrefix(l, "status::") })
	b.fake.SetIssueLabels(b.ref, "mallory", append(labels, "status::in_development")...)

	st := b.loseStore()
	require.Equal(t, 1, st.Rebuilt)
	require.Zero(t, st.States[mailbox.StateInDevelopment], "the label is not taken: %v", st.States)
	require.Zero(t, st.States[mailbox.StateInCI])
	b.advance()
	b.reconcile()
	b.advance()
	require.Zero(t, b.jobsOf(phase.Development), "no development run without a validated plan")
}

// TestRebuildNeverAdoptsAnotherMergeRequest: an issue moved to another project keeps the
// comment "I opened merge request !N from `agent/…`", whose number names someone else's merge
// request there. The rebuild does not take it for Alfred's (ci_fix would push onto that
// branch, its merge would end the issue): the mailbox is blocked with the reason, and a retry
// runs the development again.
func TestRebuildNeverAdoptsAnotherMergeRequest(t *testing.T) {
	t.Parallel()
	fake := forgetest.NewFake(forge.KindGitLab)
	fake.AddUser("alice")
	fake.AddUser("mallory")
	const moved = "acme/moved"
	fake.AddRepo(moved, "main", "/nonexistent.git")
	fake.SetAccess(moved, "alice", true)
	theirs := fake.AddMergeRequest(moved, "mallory/feature", "main", "Mallory's work", "mallory")
	n := fake.AddIssue(moved, forgetest.SeedIssue{Title: "Export the monthly report as CSV", Author: "alice",
		Labels: []string{"type::task", "status::in_ci"}, Assignees: []string{forgetest.BotLogin}})
	ref := forge.IssueRef{Forge: "gl", Repo: moved, Number: n}
	fake.AddComment(ref, forgetest.BotLogin, mailbox.Marker("ack-1", "ack")+"\nThanks @alice, I am on it.")
	fake.AddComment(ref, forgetest.BotLogin, mailbox.Marker("mr-1", "merge_request")+
		fmt.Sprintf("\nI opened merge request !%d from `agent/issue-7-export-the-monthly-report-as-csv`.", theirs))
	is, err := fake.Issue(context.Background(), ref)
	require.NoError(t, err)
	is.Ref = ref
	rb, err := mailbox.DeriveMailbox(context.Background(), mailbox.Bot{Forge: fake, Login: forgetest.BotLogin}, mailbox.Config{}, is, time.Now())
	require.NoError(t, err)
	require.NotNil(t, rb)
	require.Equal(t, mailbox.StateBlocked, rb.Mailbox.State)
	require.Zero(t, rb.Mailbox.MRNumber)
	require.Equal(t, "agent/issue-7-export-the-monthly-report-as-csv", rb.Mailbox.Branch)
	require.Equal(t, fmt.Sprintf("rebuilt from the forge: merge request !%d is from mallory/feature, not from my branch agent/issue-7-export-the-monthly-report-as-csv", theirs),
		rb.Mailbox.Data.Blocked)
	require.Equal(t, mailbox.StateInDevelopment, rb.Mailbox.Data.BlockedFrom)
}

// TestRebuildInCIWithoutTheMergeRequestComment: Alfred's "I opened merge request" comment was
// deleted, CI fails on the head and the store is lost. The status says in_ci, but no merge
// request is known: the mailbox is blocked with the reason instead of reading the CI of no
// head and calling the merge request ready for review.
func TestRebuildInCIWithoutTheMergeRequestComment(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	mb := b.toCI()
	for _, c := range b.fake.IssueComments(b.ref) {
		if k, _, ok := mailbox.ParseMarker(c.Body); ok && strings.HasPrefix(k, "mr-") {
			b.fake.DeleteComment(b.ref, c.ID)
		}
	}
	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL"})
	b.loseStore()
	b.clock.Add(11 * time.Minute) // past ci_wait
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, "rebuilt from the forge: no comment of mine names the merge request", mb.Data.Blocked)
	require.NotContains(t, strings.Join(b.comments(), "\n"), "No pipeline ran")
}

// TestRebuildCountsCIFixAttemptsSinceTheRetry: CI failed three times, the mailbox blocked,
// a writer's retry gave the fixes fresh attempts and one more ran; the store is then lost. The
// rebuild counts the fixes since the retry, as the live mailbox did, so the next failure runs a
// fix instead of blocking at once.
func TestRebuildCountsCIFixAttemptsSinceTheRetry(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.machine = mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, CIFixAttempts: 3},
		b.store, b.bots, b.exec, b.clock.Now, b.log)
	mb := b.toCI()
	sha := func(id int) string { return fmt.Sprintf("%040d", id) }
	for id := 1; id <= 8; id++ {
		b.fake.SetCI(repo, sha(id), forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL"})
	}
	for i := 0; i < 6 && mb.State != mailbox.StateBlocked; i++ {
		mb = b.poll()
	}
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, 3, mb.Data.CIAttempts)
	b.deliver(comment("alice", "retry"))
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	live := mb.Data.CIAttempts
	require.Less(t, live, 3, "the retry's fixes, on fresh attempts")

	b.loseStore()
	mb = b.advance()
	require.Equal(t, live, mb.Data.CIAttempts, "rebuilt: the fixes since the retry")
}

// TestRebuildKeepsAWritersHold: while Alfred has no store, a writer adds status::blocked to stop
// the work; Forgejo and GitLab Free keep the old status::in_ci beside it. The rebuild takes the
// hold: the mailbox is blocked, not in CI going on.
func TestRebuildKeepsAWritersHold(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toCI()
	b.fake.SetIssueLabels(b.ref, "alice", append(b.fake.IssueLabels(b.ref), "status::blocked")...)
	st := b.loseStore()
	require.Equal(t, map[mailbox.State]int{mailbox.StateBlocked: 1}, st.States)
	b.reconcile()
	require.Equal(t, mailbox.StateBlocked, b.advance().State)
}

// TestRebuildOfAReassignedDoneIssueStartsAgain: the issue is done (merged, closed, the bot
// unassigned); while Alfred has no store, alice reopens it and assigns the bot again. After the
// rebuild, reconciliation sees the assignment and a new lifecycle starts, as the live bot does.
func TestRebuildOfAReassignedDoneIssueStartsAgain(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.fromCIToDone(b.toCI())
	b.fake.SetIssueState(b.ref, "alice", "closed")
	require.NotContains(t, b.fake.IssueAssignees(b.ref), forgetest.BotLogin, "the bot unassigned itself")
	b.fake.SetIssueState(b.ref, "alice", "open")
	b.fake.SetIssueAssignees(b.ref, "alice", append(b.fake.IssueAssignees(b.ref), forgetest.BotLogin)...)

	b.loseStore()
	b.reconcile()
	mb := b.advance()
	require.NotEqual(t, mailbox.StateDone, mb.State, "the lifecycle starts again")
	require.Nil(t, mb.ClosedAt)
}

// TestRebuildWithTheStatusLabelRemovedByHand: the plan waits for validation when a person
// removes the status label, then the store is lost. The rebuild does not start the issue again
// (a second acknowledgement, the analyses run again): it blocks with the reason, and a retry
// resumes at the plan's validation, where the comments show it was.
func TestRebuildWithTheStatusLabelRemovedByHand(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	b.toValidation()
	analyses, comments := b.jobsOf(phase.Analysis), len(b.comments())
	labels := slices.DeleteFunc(b.fake.IssueLabels(b.ref), func(l string) bool { return strings.HasPrefix(l, "status::") })
	b.fake.SetIssueLabels(b.ref, "alice", labels...)

	b.loseStore()
	b.reconcile()
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, "rebuilt from the forge: the issue has no status label (removed by hand?)", mb.Data.Blocked)
	require.Equal(t, mailbox.StateWaitingValidation, mb.Data.BlockedFrom)
	require.Equal(t, analyses, b.jobsOf(phase.Analysis), "no analysis ran again")
	require.Len(t, b.comments(), comments, "nothing posted again")
}

// A rebuild that meets the forge unavailable on one issue after another issue's lasting error
// (a 403) reports the unavailability, so that the start-up rebuild waits for the forge instead
// of letting the workers take the issues not rebuilt yet for new assignments.
func TestRebuildReportsTheForgeUnavailableAfterAnotherError(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"forbidden first", "unavailable first"} {
		t.Run(order, func(t *testing.T) {
			b := setup(t)
			second := b.fake.AddIssue(repo, forgetest.SeedIssue{Title: "Another", Author: "alice", Assignees: []string{forgetest.BotLogin}})
			require.NoError(t, b.fake.SetAssignees(t.Context(), b.ref, []string{forgetest.BotLogin}, nil))
			fail := map[int64]error{b.ref.Number: forge.ErrForbidden, second: forge.ErrUnavailable}
			if order == "unavailable first" {
				fail = map[int64]error{b.ref.Number: forge.ErrUnavailable, second: forge.ErrForbidden}
			}
			b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
				if ref.Number != 0 && !ref.MergeRequest {
					return fail[ref.Number]
				}
				return nil
			})
			store := mailboxtest.NewStore(b.clock.Now)
			r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Scopes: map[string]mailbox.Scope{"gl": {Repositories: []string{repo}}}},
				store, store, b.bots, b.clock.Now, b.log)
			_, err := r.Rebuild(t.Context(), store, rebuildConfig)
			require.ErrorIs(t, err, forge.ErrUnavailable)
		})
	}
}
