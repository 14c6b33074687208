package mailbox_test

import (
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

// setupAutoMerge is setupReview with cfg's AutoMerge, MergeMethod and Settings and the forge
// behind mailbox.GuardPosts, driven to in_review with CI green; merges into main need one
// approval.
func setupAutoMerge(t *testing.T, cfg mailbox.Config) (*bundle, *mailbox.Mailbox) {
	t.Helper()
	b := setupReview(t)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.CIWait, cfg.CIPoll, cfg.CIFixAttempts, cfg.ReviewFixAttempts, cfg.ReviewQuiet = 10*time.Minute, time.Minute, 1, 2, time.Second
	// Through the post guard, as cmd/alfred wires the forge: the merge calls pass through it.
	posts := mailbox.GuardPosts(b.fake, mailbox.PostGuard{})
	b.machine = mailbox.NewMachine(cfg, b.store, map[string]mailbox.Bot{"gl": {Forge: posts, Login: forgetest.BotLogin}},
		b.exec, b.clock.Now, log)
	b.fake.SetRequiredApprovals(repo, "main", 1)
	b.toCI()
	b.ciEverywhere(forge.CISuccess)
	mb := b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	return b, mb
}

// countComments counts the issue's comments that contain s.
func (b *bundle) countComments(s string) int {
	n := 0
	for _, c := range b.comments() {
		if strings.Contains(c, s) {
			n++
		}
	}
	return n
}

// merges counts the Merge calls made on the forge.
func (b *bundle) merges() int {
	n := 0
	for _, c := range b.fake.Calls() {
		if c.Method == "Merge" {
			n++
		}
	}
	return n
}

func TestAutoMergeMergesWhenGreenApprovedAndNoThreadOpen(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State, "auto-merge is opt-in")
	require.Zero(t, b.merges())

	b.addLabel("alice", "ai::auto_merge")
	mb = b.advance()
	require.Equal(t, mailbox.StateDone, mb.State)
	require.Equal(t, "merge", b.fake.MergedWith(repo, mb.MRNumber))
	require.Contains(t, strings.Join(b.comments(), "\n"), "Auto-merge is on, as @alice added `ai::auto_merge`")
	require.Contains(t, b.lastComment(), "I merged merge request !1 (merge): CI is green on")
	require.Contains(t, b.lastComment(), "approved by alice")
	require.Equal(t, []string{"status::done"}, b.status())
	b.requireUniqueMarkers()
}

func TestAutoMergeByScopedSettingWithItsMethod(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{Settings: func(string) mailbox.Settings {
		return mailbox.Settings{AutoMerge: true, MergeMethod: forge.MergeSquash, CIFixAttempts: 1}
	}})
	require.Zero(t, b.merges(), "not approved yet")
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	require.Equal(t, mailbox.StateDone, mb.State)
	require.Equal(t, "squash", b.fake.MergedWith(repo, mb.MRNumber))
}

func TestAutoMergeWaitsForApprovalsAndOpenThreads(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{AutoMerge: true})
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State, "the required approval is missing")
	require.Zero(t, b.merges())

	// An approval, but a review thread is open: still waiting, and silently.
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.fake.AddReview(repo, mb.MRNumber, "bob", "commented", "", forgetest.SeedReviewComment{Path: "a.go", NewLine: 3, Body: "Why?"})
	comments := len(b.comments())
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State, "a review thread is open")
	require.Zero(t, b.merges())
	require.Len(t, b.comments(), comments)

	b.fake.ResolveThreads(repo, mb.MRNumber)
	mb = b.poll()
	require.Equal(t, mailbox.StateDone, mb.State)
	require.Equal(t, 1, b.merges())
}

func TestAutoMergeNotWhenCIIsNotGreen(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{AutoMerge: true})
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.fake.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CIPending})
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Zero(t, b.merges(), "a pipeline runs again on the head")
}

func TestAutoMergeRefusalIsReportedOnce(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{AutoMerge: true})
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.fake.ProtectBranch(repo, "main")
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State, "the mailbox stays in review")
	require.Equal(t, 1, b.merges())
	require.Equal(t, 1, b.countComments("the forge refused to merge it"))
	require.Contains(t, b.lastComment(), "forge: forbidden")

	// The next passes neither try the same head again nor say it again.
	mb = b.poll()
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Equal(t, 1, b.merges())
	require.Equal(t, 1, b.countComments("the forge refused to merge it"))

	// A review on the merge request has it tried again: refused again, still one comment.
	mrRef := forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
	b.deliver(forge.Event{Type: forge.EventReview, Target: mrRef, Sender: forge.User{Login: "alice"},
		Review: &forge.Review{State: "approved"}})
	mb = b.advance()
	require.Equal(t, 2, b.merges())
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Equal(t, 1, b.countComments("the forge refused to merge it"))
	b.requireUniqueMarkers()
}

func TestAutoMergeLabelNeedsWriteAccess(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.addLabel("mallory", "ai::auto_merge")
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::auto_merge", "removed")
	require.Contains(t, b.lastComment(), "@mallory, only a project member with write access can turn auto-merge on")
	mb = b.poll()
	require.Zero(t, b.merges())
}

func TestAutoMergeOffOnceTheLabelIsRemoved(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	b.addLabel("alice", "ai::auto_merge")
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State, "not approved yet")

	labels := b.fake.IssueLabels(b.ref)
	require.NoError(t, b.fake.SetLabels(t.Context(), b.ref, nil, []string{"ai::auto_merge"}))
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: labels, Labels: b.fake.IssueLabels(b.ref)})
	b.advance()
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mb = b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Zero(t, b.merges(), "auto-merge went with the label")
}

// TestAutoMergeLabelAddedAgainByABotAfterRemoval: a writer turned auto-merge on, then off; a
// bot without write access adds the label again. Nobody with write access enabled it now:
// Alfred does not merge in the writer's name, and takes the bot's label off.
func TestAutoMergeLabelAddedAgainByABotAfterRemoval(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	b.fake.AddUser("renovate")
	b.fake.SetAccess(repo, "renovate", false)
	b.addLabel("alice", "ai::auto_merge")
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)

	labels := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "alice", slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return l == "ai::auto_merge" })...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: labels, Labels: b.fake.IssueLabels(b.ref)})
	b.advance()

	b.fake.SetIssueLabels(b.ref, "renovate", append(b.fake.IssueLabels(b.ref), "ai::auto_merge")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "renovate", Bot: true}, LabelsKnown: true,
		Labels: b.fake.IssueLabels(b.ref)})
	b.advance()
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.poll()
	require.Zero(t, b.merges(), "no writer's label is in force")
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::auto_merge", "the bot's label is taken off")
}

// TestAutoMergeLabelAddedByTheBotEnablesNothing: ai::auto_merge that the label history shows
// the bot adding (a GitLab quick action in a text it posted, or its token used by hand) names no
// enabler: the bot never turns auto-merge on, so Alfred does not merge.
func TestAutoMergeLabelAddedByTheBotEnablesNothing(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	b.fake.SetAccess(repo, forgetest.BotLogin, true) // it pushes, and merges when allowed to
	b.fake.SetIssueLabels(b.ref, forgetest.BotLogin, append(b.fake.IssueLabels(b.ref), "ai::auto_merge")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: forgetest.BotLogin}, LabelsKnown: true,
		Labels: b.fake.IssueLabels(b.ref)})
	b.advance()
	// A writer's later change carries the labels as they are, the bot's among them (GitLab's
	// changes.labels: previous and current).
	prev := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "alice", append(slices.Clone(prev), "frontend")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: prev, Labels: b.fake.IssueLabels(b.ref)})
	b.advance()
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.poll()
	b.poll()
	require.Zero(t, b.merges(), "the bot is nobody's enabler")
}

// TestAutoMergeWaitsForAWritersReviewComment: a writer asks for a change on the approved, green
// merge request; auto-merge does not merge while the comment waits for its review_fix.
func TestAutoMergeWaitsForAWritersReviewComment(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{AutoMerge: true})
	b.exec.results["review_fix"] = &phase.Result{Summary: "renamed", CommitMessage: "Rename"}
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
	body := "@" + forgetest.BotLogin + " please also rename the button to Export CSV"
	id := b.fake.AddComment(mr, "alice", body)
	b.deliver(forge.Event{Type: forge.EventComment, Target: mr, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: body}})
	mb = b.advance()
	require.Zero(t, b.merges(), "merged while a writer's change request waits for its review_fix")
	require.NotEqual(t, mailbox.StateDone, mb.State)
	require.Contains(t, mb.Data.AutoMergeWaits, "review_fix", "what auto-merge waits for is said")
}
