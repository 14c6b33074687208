package mailbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// setupSelfReview is setup with the self-review on (cfg's SelfReview, Enabled set), two
// review_fix attempts, and a self_review run that finds two blocking findings and a warning,
// of which the review_fix round fixes one and declines the other.
func setupSelfReview(t *testing.T, cfg mailbox.Config) *bundle {
	t.Helper()
	cfg.SelfReview.Enabled = true
	cfg.ReviewFixAttempts = 2
	b := setupWith(t, guard{config: cfg}, "type::task")
	b.exec.results["self_review"] = &phase.Result{Summary: "Read the diff against the plan and CONTRIBUTING.md.",
		Findings: []phase.Finding{
			{Path: "report.py", Line: 12, Severity: phase.SeverityBlocking, Text: "No test covers an empty month."},
			{Path: "report.py", Severity: phase.SeverityBlocking, Text: "The separator ignores the plan's decision q1."},
			{Severity: phase.SeverityWarning, Text: "CONTRIBUTING.md asks for a changelog entry;\nnone is added. <!-- alfred:section=self_review:end -->"},
		}}
	b.exec.results["review_fix"] = &phase.Result{Summary: "Addressed the self-review.", CommitMessage: "Test the empty month",
		Comments: []phase.CommentOutcome{
			{ID: 1, Outcome: phase.OutcomeFixed, Reply: "Added a test."},
			{ID: 2, Outcome: phase.OutcomeDeclined, Reason: "the comma is the decided separator"},
		}}
	return b
}

// mrBody returns the description of the mailbox's merge request.
func (b *bundle) mrBody(mb *mailbox.Mailbox) string {
	b.t.Helper()
	mr, err := b.fake.MergeRequest(context.Background(), repo, mb.MRNumber)
	require.NoError(b.t, err)
	return mr.Body
}

// keys returns the run keys the JobRunner got, in order.
func (b *bundle) keys() []string {
	var out []string
	for _, j := range b.exec.jobs {
		out = append(out, j.Input.Key)
	}
	return out
}

// A development that leaves findings gets one review_fix round for its blocking findings
// before CI and a human; the merge request's description lists what the round fixed and what
// is left; auto-merge waits while a blocking finding is left.
func TestSelfReviewFindingsGetOneRoundThenTheSectionListsTheRest(t *testing.T) {
	t.Parallel()
	usage := &jobUsage{cost: 0.0123}
	b := setupSelfReview(t, mailbox.Config{AutoMerge: true, Usage: usage})
	usage.exec = b.exec
	mb := b.toCI()
	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development", "self_review", "review_fix"}, b.keys(),
		"one review_fix round (self_review.max_rounds 1), then CI")

	sr := b.exec.jobs[3]
	require.False(t, sr.Push, "the self-review is read-only")
	require.NotNil(t, sr.Input.Review)
	require.Equal(t, mb.MRNumber, sr.Input.Review.MergeRequest)
	require.Equal(t, "main", sr.Input.Review.Target)
	require.NotEmpty(t, sr.Input.Plan, "the plan it reads against")
	fix := b.exec.jobs[4]
	require.True(t, fix.Push)
	require.Len(t, fix.Input.Review.Comments, 2, "the blocking findings only")
	require.Equal(t, int64(1), fix.Input.Review.Comments[0].ID)
	require.Equal(t, "report.py", fix.Input.Review.Comments[0].Path)
	require.Equal(t, 12, fix.Input.Review.Comments[0].Line)
	require.Equal(t, "No test covers an empty month.", fix.Input.Review.Comments[0].Body)
	require.Equal(t, fix.SessionName, sr.SessionName, "the same session")

	require.Equal(t, []string{"status::in_ci"}, b.status())
	require.Contains(t, b.lastComment(), "My self-review of merge request !1 found 2 blocking finding(s): I fixed 1 in")
	goldenComment(t, "self_review_section.md", b.mrBody(mb))
	require.Contains(t, statusComment(t, b), "| self_review | 1 | 30s | 1000 | 100 | $0.0123 |", "the status comment shows its cost")

	// CI green, approved: auto-merge is on, but a blocking finding is left for a human.
	b.ciEverywhere(forge.CISuccess)
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State, "auto-merge waits: a blocking finding is left")
	require.Zero(t, b.merges())
	b.requireUniqueMarkers()
}

// Without a blocking finding the merge request goes to CI at once, the section says what was
// checked, and auto-merge merges once the self-review is over.
func TestSelfReviewCleanGoesOnAndAutoMergeFollows(t *testing.T) {
	t.Parallel()
	b := setupSelfReview(t, mailbox.Config{AutoMerge: true})
	b.exec.results["self_review"] = &phase.Result{Summary: "Nothing to say.",
		Findings: []phase.Finding{{Path: "README.md", Severity: phase.SeverityNote, Text: "Mention the export."}}}
	mb := b.toCI()
	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development", "self_review"}, b.keys())
	body := b.mrBody(mb)
	require.Contains(t, body, "### Self-review")
	require.Contains(t, body, "**Left for you** (1)")
	require.Contains(t, body, "Mention the export.")
	require.True(t, strings.HasPrefix(body, "Closes #"), "the description Alfred wrote is kept")

	b.ciEverywhere(forge.CISuccess)
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	for i := 0; i < 3 && mb.State == mailbox.StateInReview; i++ {
		mb = b.poll()
	}
	require.Equal(t, mailbox.StateDone, mb.State, "merged once the self-review is over")
}

// A self_review run that fails is run once more; failing again, the issue goes on to CI and
// review (never blocked by it) with "self-review failed: …" in the description, and auto-merge
// leaves the merge to a human.
func TestSelfReviewThatFailsNeverBlocks(t *testing.T) {
	t.Parallel()
	b := setupSelfReview(t, mailbox.Config{AutoMerge: true})
	b.exec.failures["self_review"] = "agent wrote no result"
	mb := b.toCI()
	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development", "self_review", "self_review"}, b.keys())
	require.Equal(t, 2, b.exec.jobs[4].Attempt)
	require.Equal(t, []string{"status::in_ci"}, b.status())
	body := b.mrBody(mb)
	require.Contains(t, body, "**self-review failed:** the self_review run (attempt 2) failed: agent wrote no result")
	goldenComment(t, "self_review_failed.md", body)

	b.ciEverywhere(forge.CISuccess)
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State, "the human merges what the bot could not check")
	require.Zero(t, b.merges())
}

// Off for a project (a scope's self_review: false), the development goes straight to CI.
func TestSelfReviewOffPerScope(t *testing.T) {
	t.Parallel()
	b := setupSelfReview(t, mailbox.Config{Settings: func(string) mailbox.Settings { return mailbox.Settings{SelfReview: false} }})
	mb := b.toCI()
	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development"}, b.keys())
	require.NotContains(t, b.mrBody(mb), "Self-review")
}

// With self_review.max_rounds 2 the merge request is read again after the first round, and a
// blocking finding the second reading still reports gets the second round.
func TestSelfReviewRoundsAreBounded(t *testing.T) {
	t.Parallel()
	b := setupSelfReview(t, mailbox.Config{SelfReview: mailbox.SelfReviewConfig{MaxRounds: 2}})
	b.exec.results["review_fix"] = &phase.Result{Summary: "Tried.", CommitMessage: "Try",
		Comments: []phase.CommentOutcome{{ID: 1, Outcome: phase.OutcomeFixed}, {ID: 2, Outcome: phase.OutcomeFixed}}}
	b.toCI()
	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development",
		"self_review", "review_fix", "self_review", "review_fix"}, b.keys())
}
