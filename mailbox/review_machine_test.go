package mailbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// setupReview is setup with one ci_fix attempt, two review_fix attempts and a ceiling of two
// runs under ai::retry_until_green.
func setupReview(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, "type::task")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.machine = mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, CIFixAttempts: 1,
		ReviewFixAttempts: 2, RetryUntilGreenMax: 2, ReviewQuiet: time.Second}, b.store,
		map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}}, b.exec, b.clock.Now, log)
	return b
}

// toCI drives the issue to in_ci and returns the mailbox.
func (b *bundle) toCI() *mailbox.Mailbox {
	b.t.Helper()
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "ok"))
	b.advance()
	b.addLabel("alice", "ai::validate_plan")
	mb := b.advance()
	require.Equal(b.t, mailbox.StateInCI, mb.State)
	return mb
}

func (b *bundle) addLabel(by, label string) {
	b.t.Helper()
	b.fake.SetIssueLabels(b.ref, by, append(b.fake.IssueLabels(b.ref), label)...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: by}, LabelsKnown: true,
		Labels: b.fake.IssueLabels(b.ref)})
}

// ciEverywhere sets state on every commit the scripted runs push (one per run id).
func (b *bundle) ciEverywhere(state forge.CIState) {
	for id := 1; id <= 30; id++ {
		b.fake.SetCI(repo, fmt.Sprintf("%040d", id), forgetest.CIJob{Name: "test", State: state, Log: "FAIL"})
	}
}

// poll lets ci_poll pass and advances.
func (b *bundle) poll() *mailbox.Mailbox {
	b.clock.Add(time.Minute)
	return b.advance()
}

func TestRetryOnceGivesExactlyOneMoreAttempt(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	b.toCI()
	b.ciEverywhere(forge.CIFailed)
	mb := b.poll() // failed: the one ci_fix, then failed again: blocked
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "CI still fails")
	fixes := len(b.exec.jobs)

	b.addLabel("mallory", "ai::retry_once")
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State, "a retry label needs write access")
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::retry_once")

	b.addLabel("alice", "ai::retry_once")
	mb = b.poll()
	require.Equal(t, mailbox.StateBlocked, mb.State, "one attempt, failed again")
	require.Len(t, b.exec.jobs, fixes+1)
	require.Equal(t, "ci_fix", b.exec.jobs[fixes].Input.Key)
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::retry_once", "Alfred removes the label")
	require.Contains(t, strings.Join(b.comments(), "\n"), "Trying once more, as asked by @alice.")
	require.Equal(t, []string{"status::blocked"}, b.status())
}

func TestRetryUntilGreenStopsAtTheCeilingOrWhenGreen(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	b.toCI()
	b.ciEverywhere(forge.CIFailed)
	require.Equal(t, mailbox.StateBlocked, b.poll().State)
	fixes := len(b.exec.jobs)

	// Past the bound of one ci_fix, up to the ceiling of two runs under the label.
	b.addLabel("alice", "ai::retry_until_green")
	mb := b.poll()
	for i := 0; i < 5 && mb.State != mailbox.StateBlocked; i++ {
		mb = b.poll()
	}
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Len(t, b.exec.jobs, fixes+3, "the resumed ci_fix, then two more under the label")
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::retry_until_green")
	require.Contains(t, strings.Join(b.comments(), "\n"), "CI is still not green: I removed the label.")

	// Again, and CI turns green: the label goes with a word saying so.
	b.ciEverywhere(forge.CISuccess)
	b.addLabel("alice", "ai::retry_until_green")
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::retry_until_green")
	require.Contains(t, b.lastComment(), "I removed `ai::retry_until_green`.")
	require.Contains(t, b.lastComment(), "CI is green on")
	b.requireUniqueMarkers()
}

// Removing ai::retry_until_green ends it: the next failure meets the usual bound of ci_fix
// attempts (spent already), so Alfred blocks instead of running on under a label that is gone.
func TestRetryUntilGreenEndsWithItsLabel(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	b.toCI()
	b.ciEverywhere(forge.CIFailed)
	require.Equal(t, mailbox.StateBlocked, b.poll().State)
	b.ciEverywhere(forge.CIPending) // the resumed run's CI has not ended when the label goes
	b.addLabel("alice", "ai::retry_until_green")
	mb := b.poll()
	require.Equal(t, mailbox.StateInCI, mb.State, "resumed under the label")
	require.True(t, mb.Data.UntilGreen)
	runs := len(b.exec.jobs)

	labels := mb.Labels // addLabel tells the mailbox, not the forge stand-in
	require.Contains(t, labels, "ai::retry_until_green")
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: labels, Labels: slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return l == "ai::retry_until_green" })})
	mb = b.advance()
	require.False(t, mb.Data.UntilGreen)
	b.ciEverywhere(forge.CIFailed)
	for i := 0; i < 5 && mb.State != mailbox.StateBlocked; i++ {
		mb = b.poll()
	}
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, runs, len(b.exec.jobs), "no run after the label went")
}

func TestReviewCommentsGatheredRefusedAndBounded(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	b.exec.results["review_fix"] = nil // set below per run
	b.toCI()
	b.ciEverywhere(forge.CISuccess)
	mb := b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
	note := func(by string, id int64, body string) forge.Event {
		return forge.Event{Type: forge.EventComment, Target: mr, Sender: forge.User{Login: by},
			Comment: &forge.Comment{ID: id, Body: body, Position: &forge.Position{Path: "a.go", NewLine: 1}}}
	}

	// Someone without write access is refused, visibly; nothing runs.
	b.deliver(note("mallory", 71, "rename this"))
	mb = b.advance()
	require.Contains(t, b.lastComment(), "@mallory, only a project member with write access can ask me to change the merge request")
	b.clock.Add(2 * time.Second)
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)

	// Two diff notes by alice within the quiet time: one review_fix run takes both.
	for i, body := range []string{"rename this", "and this"} {
		id := b.fake.AddReview(repo, mb.MRNumber, "alice", "commented", "", forgetest.SeedReviewComment{Path: "a.go", NewLine: i + 1, Body: body})
		b.deliver(note("alice", id[0], body))
		b.advance()
	}
	runs := len(b.exec.jobs)
	require.Equal(t, mailbox.StateInReview, b.advance().State, "still quiet")
	b.exec.results["review_fix"] = reviewFixResult(b, mb.MRNumber)
	b.clock.Add(2 * time.Second)
	mb = b.advance()
	require.Len(t, b.exec.jobs, runs+1)
	job := b.exec.jobs[runs]
	require.Equal(t, "review_fix", job.Input.Key)
	require.Len(t, job.Input.Review.Comments, 2, "gathered into one run")
	require.Equal(t, 1, job.Input.Review.Comments[0].Line)
	require.Equal(t, mailbox.StateInReview, mb.State, "pushed, CI green again")
	require.Contains(t, strings.Join(b.comments(), "\n"), "I went through the review of merge request !1: 2 fixed")
	for _, c := range b.fake.ThreadComments(repo, mb.MRNumber) {
		require.True(t, c.Resolved, "GitLab: the fixed discussions are resolved")
	}

	// A follow-up in a discussion Alfred resolved: GitLab keeps the discussion resolved, the
	// reply too (in alice's name), and it is the next round's comment.
	first := b.fake.ThreadComments(repo, mb.MRNumber)[0]
	follow := b.fake.AddThreadReply(repo, mb.MRNumber, first.Thread, "alice", "and its test")
	b.deliver(note("alice", follow, "and its test"))
	b.advance()
	b.exec.results["review_fix"] = reviewFixResult(b, mb.MRNumber)
	b.clock.Add(2 * time.Second)
	mb = b.advance()
	job = b.exec.jobs[len(b.exec.jobs)-1]
	require.Equal(t, "review_fix", job.Input.Key)
	require.Len(t, job.Input.Review.Comments, 1, "the follow-up alone")
	require.Equal(t, follow, job.Input.Review.Comments[0].ID)
	require.Equal(t, mailbox.StateInReview, mb.State)

	// A third round is past review_fix_attempts (2): blocked with the reason.
	id := b.fake.AddReview(repo, mb.MRNumber, "alice", "commented", "", forgetest.SeedReviewComment{Path: "b.go", NewLine: 1, Body: "more"})
	b.deliver(note("alice", id[0], "more"))
	b.advance()
	b.exec.results["review_fix"] = reviewFixResult(b, mb.MRNumber)
	b.clock.Add(2 * time.Second)
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "review_fix ran 2 times on this merge request")
}

// reviewFixResult answers every pending thread comment of the merge request as fixed.
func reviewFixResult(b *bundle, mr int64) *phase.Result {
	r := &phase.Result{Summary: "fixed", CommitMessage: "Fix review"}
	for _, c := range b.fake.ThreadComments(repo, mr) {
		if c.Author.Login != forgetest.BotLogin {
			r.Comments = append(r.Comments, phase.CommentOutcome{ID: c.ID, Outcome: phase.OutcomeFixed})
		}
	}
	return r
}

func TestConflictWithTheTargetRunsConflictResolution(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	b.exec.results["conflict_resolution"] = &phase.Result{Summary: "Merged main."}
	b.toCI()
	b.ciEverywhere(forge.CISuccess)
	mb := b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	runs := len(b.exec.jobs)

	b.fake.SetMergeStatus(repo, mb.MRNumber, forge.MergeStatusConflict)
	mb = b.poll()
	require.Len(t, b.exec.jobs, runs+1)
	job := b.exec.jobs[runs]
	require.Equal(t, "conflict_resolution", job.Input.Key)
	require.Equal(t, "main", job.Input.Conflict.Target)
	require.True(t, job.Push)
	require.Equal(t, job.Branch, mb.Branch, "the merge goes on the mailbox's branch")
	require.Contains(t, strings.Join(b.comments(), "\n"), "conflicts with `main`: I am merging `main` into")
	require.Contains(t, strings.Join(b.comments(), "\n"), "I merged the target branch into")
	require.Equal(t, mailbox.StateInReview, mb.State, "merged, CI green: back in review")
	b.requireUniqueMarkers()
}

// Issue 25: an event sent before Alfred's push names the old head (a pull request update, a
// failed status of the old commit); applied after the push, it must not move the head back nor
// start a ci_fix for a commit that is no longer the head.
func TestStaleHeadEventsStartNothing(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	sent := b.clock.Now() // the forge sent these before the run pushed
	b.clock.Add(time.Second)
	mb := b.toCI()
	head := mb.HeadSHA
	old := fmt.Sprintf("%040d", 99)
	b.fake.SetCI(repo, old, forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL"})
	jobs := len(b.exec.jobs)
	for i, ev := range []forge.Event{
		{Type: forge.EventMergeRequestUpdated, MergeRequest: &forge.MergeRequest{SourceBranch: mb.Branch, HeadSHA: old}},
		{Type: forge.EventPipeline, Pipeline: &forge.Pipeline{SHA: old, State: forge.CIFailed, MergeRequest: mb.MRNumber}},
	} {
		ev.Forge, ev.Kind, ev.Sender = "gl", forge.KindGitLab, forge.User{Login: "ci"}
		ev.DeliveryID, ev.BodyHash = fmt.Sprintf("stale-%d", i), fmt.Sprintf("stale-h-%d", i)
		ev.Target = forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
		ev.ReceivedAt = sent
		_, err := b.store.Deliver(context.Background(), ev)
		require.NoError(t, err)
	}
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State, "no ci_fix for the old commit")
	require.Equal(t, head, mb.HeadSHA, "the head is not moved back")
	require.Len(t, b.exec.jobs, jobs)
}

// TestReviewReplyOnceAfterAFailedPass: the forge fails (5xx) while Alfred acts on a review_fix
// outcome, after it replied to the comment (the summary in the issue answers 502); the next
// pass acts on the same stored outcome with the comments the run was given, not those still
// unanswered on the forge (none): the summary is posted, the pushed head is the merge
// request's head and, through CI (green here), the issue is back in review, as when the pass
// had not failed; the comment is
// answered once, and the run counts once against review_fix_attempts.
func TestReviewReplyOnceAfterAFailedPass(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	b.toCI()
	b.ciEverywhere(forge.CISuccess)
	mb := b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
	body := "@" + forgetest.BotLogin + " please rename the button to Export CSV"
	id := b.fake.AddComment(mr, "alice", body)
	b.deliver(forge.Event{Type: forge.EventComment, Target: mr, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: body}})
	b.advance()
	b.exec.results["review_fix"] = &phase.Result{Summary: "renamed", CommitMessage: "Rename",
		Comments: []phase.CommentOutcome{{ID: id, Outcome: phase.OutcomeFixed, Reply: "Renamed."}}}
	failed := false
	b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
		if method == "Comment" && !ref.MergeRequest && ref.Number == b.ref.Number && !failed {
			failed = true // the summary in the issue, after the reply in the merge request
			return fmt.Errorf("502: %w", forge.ErrUnavailable)
		}
		return nil
	})
	jobs := len(b.exec.jobs)
	b.clock.Add(2 * time.Second) // the review's quiet time
	b.failedPass()
	require.True(t, failed)
	require.Len(t, b.exec.jobs, jobs+1, "one review_fix run")
	pushed := fmt.Sprintf("%040d", b.exec.jobs[jobs].RunID)
	b.clock.Add(time.Minute)
	mb = b.advance()
	require.Len(t, b.exec.jobs, jobs+1, "the run is not run again")
	require.Equal(t, 1, b.countComments("I went through the review of"), "the review_fix summary is posted once")
	require.Equal(t, pushed, mb.HeadSHA, "the review_fix's push is the head")
	require.Equal(t, mailbox.StateInReview, mb.State, "the pushed head went through CI, green, back to review")
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	last := runs[len(runs)-1]
	require.Equal(t, "review_fix", last.Phase)
	require.True(t, last.Applied, "the stored outcome is acted on, not discarded")
	replies := 0
	cs, err := b.fake.Comments(context.Background(), mr)
	require.NoError(t, err)
	for _, c := range cs {
		if c.Author.Login == forgetest.BotLogin && strings.Contains(c.Body, "Renamed.") {
			replies++
		}
	}
	require.Equal(t, 1, replies, "the comment is answered once")
	require.Contains(t, mb.Data.Handled, id, "the comment is handled")
	require.Equal(t, 1, mb.Data.ReviewAttempts, "one run, counted once")
}

// TestLateDeliveryOfAReplacedHead: the forge delivers late (a retry) an event that names the
// head Alfred's ci_fix push replaced; the head stays the pushed one, and CI of the old head is
// not acted on.
func TestLateDeliveryOfAReplacedHead(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	mb := b.toCI()
	old := mb.HeadSHA
	b.fake.SetCI(repo, old, forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL"})
	mb = b.poll() // failed on old: one ci_fix, which pushes a new head
	require.NotEqual(t, old, mb.HeadSHA)
	require.Equal(t, mailbox.StateInCI, mb.State)
	head := mb.HeadSHA
	b.fake.SetCI(repo, head, forgetest.CIJob{Name: "test", State: forge.CISuccess})
	jobs := len(b.exec.jobs)

	b.clock.Add(5 * time.Second)
	b.deliver(forge.Event{Type: forge.EventMergeRequestUpdated, Sender: forge.User{Login: forgetest.BotLogin},
		Target:       forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: mb.MRNumber, SourceBranch: mb.Branch, HeadSHA: old, State: "open"}})
	mb = b.poll()
	require.Equal(t, head, mb.HeadSHA, "the head is not moved back to %s", old)
	require.Equal(t, mailbox.StateInReview, mb.State, "CI of the pushed head decides")
	require.Len(t, b.exec.jobs, jobs, "no second ci_fix")
}

// GitLab's merged-results pipelines (and merge trains) run on a merge commit of the head into
// the target branch, so their sha is not the head's: their event is not taken for one of an
// older head, and their failure is fixed instead of missed as "no pipeline".
func TestMergedResultsPipelineIsTheHeadsCI(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	mb := b.toCI()
	b.fake.SetBranch(repo, mb.Branch, mb.HeadSHA)
	_, merge := b.fake.AddMergedResultsPipeline(repo, mb.MRNumber, "",
		forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL: TestExport, merged with main"})
	b.deliver(forge.Event{Type: forge.EventPipeline, Target: forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		Pipeline: &forge.Pipeline{State: forge.CIFailed, SHA: merge, Ref: fmt.Sprintf("refs/merge-requests/%d/merge", mb.MRNumber),
			MergeRequest: mb.MRNumber}})
	first := mb.HeadSHA
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.NotEqual(t, first, mb.HeadSHA, "a ci_fix run pushed")
	last := b.exec.jobs[len(b.exec.jobs)-1]
	require.Equal(t, phase.CIFix, last.Input.Phase)
	require.Contains(t, last.Input.CILog, "FAIL: TestExport, merged with main")
}

// A merge request pipeline as GitLab's Pipeline Hook sends it (merged results: its ref the
// source branch, its sha a merge commit of the head, its source merge_request_event, parsed as
// forge.Pipeline.OfMergeRequest) is the CI of the merge request's head: its failure starts the
// ci_fix at once, not at the next ci_poll.
func TestMergeRequestPipelineAsGitLabSendsItIsTheHeadsCI(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	mb := b.toCI()
	b.fake.SetBranch(repo, mb.Branch, mb.HeadSHA)
	_, merge := b.fake.AddMergedResultsPipeline(repo, mb.MRNumber, "",
		forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "FAIL: TestExport, merged with main"})
	b.deliver(forge.Event{Type: forge.EventPipeline, Header: "Pipeline Hook", Action: "failed",
		Target: forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true},
		Pipeline: &forge.Pipeline{State: forge.CIFailed, SHA: merge, Ref: mb.Branch, MergeRequest: mb.MRNumber,
			OfMergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: mb.MRNumber, SourceBranch: mb.Branch, TargetBranch: "main", State: "open"}})
	first := mb.HeadSHA
	mb = b.advance() // no time passes: the delivery, not the ci_poll timer, decides
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.NotEqual(t, first, mb.HeadSHA, "the failed pipeline of the head starts a ci_fix run")
	last := b.exec.jobs[len(b.exec.jobs)-1]
	require.Equal(t, phase.CIFix, last.Input.Phase)
}
