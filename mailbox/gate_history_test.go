package mailbox_test

import (
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// with permissions.review raised to admin (Maintainer), a Developer's review comment
// is refused by the gate when it arrives; a Maintainer's later comment starts the review_fix,
// whose run must not take the refused Developer's comment.
func TestReviewFixTakesOnlyCommentsTheReviewRoleAllows(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.machine = mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, CIFixAttempts: 1,
		ReviewFixAttempts: 2, RetryUntilGreenMax: 2, ReviewQuiet: time.Second,
		Needs: gate.Needs{gate.Review: forge.RoleAdmin}}, b.store,
		map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}}, b.exec, b.clock.Now, log)
	b.fake.SetAccessLevel(repo, "maint", 40)
	b.toCI()
	b.ciEverywhere(forge.CISuccess)
	mb := b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
	note := func(by string, id int64, body string) forge.Event {
		return forge.Event{Type: forge.EventComment, Target: mr, Sender: forge.User{Login: by},
			Comment: &forge.Comment{ID: id, Body: body, Position: &forge.Position{Path: "a.go", NewLine: 1}}}
	}
	// alice (Developer) is below permissions.review: refused.
	id := b.fake.AddReview(repo, mb.MRNumber, "alice", "commented", "", forgetest.SeedReviewComment{Path: "a.go", NewLine: 1, Body: "delete the tests"})
	b.deliver(note("alice", id[0], "delete the tests"))
	b.advance()
	require.Contains(t, b.lastComment(), "@alice, only a project member with write access can ask me to change")
	// maint (Maintainer) asks for a change: allowed.
	id = b.fake.AddReview(repo, mb.MRNumber, "maint", "commented", "", forgetest.SeedReviewComment{Path: "a.go", NewLine: 2, Body: "rename this"})
	b.deliver(note("maint", id[0], "rename this"))
	b.advance()
	runs := len(b.exec.jobs)
	b.exec.results["review_fix"] = reviewFixResult(b, mb.MRNumber)
	b.clock.Add(2 * time.Second)
	b.advance()
	require.Len(t, b.exec.jobs, runs+1)
	job := b.exec.jobs[runs]
	require.Equal(t, "review_fix", job.Input.Key)
	var authors []string
	for _, c := range job.Input.Review.Comments {
		authors = append(authors, c.Author)
	}
	require.Equal(t, []string{"maint"}, authors, "the comment the gate refused is worked by the review_fix run")
}

// another bot with write access adds ai::auto_merge while Alfred does not see it (a
// missed delivery); a writer's later change carries the labels as they are. Another bot's label
// enables auto-merge for nobody, whatever its access: Alfred must not merge.
func TestAnotherBotsUnseenAutoMergeLabelEnablesNothing(t *testing.T) {
	t.Parallel()
	b, mb := setupAutoMerge(t, mailbox.Config{})
	b.fake.SetAccess(repo, "renovate-bot", true) // a bot account with Developer access
	b.fake.SetIssueLabels(b.ref, "renovate-bot", append(b.fake.IssueLabels(b.ref), "ai::auto_merge")...)
	// (its delivery is missed)
	prev := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "alice", append(slices.Clone(prev), "frontend")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: prev, Labels: b.fake.IssueLabels(b.ref)})
	b.advance()
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.poll()
	b.poll()
	require.Zero(t, b.merges(), "another bot's ai::auto_merge enabled auto-merge")
}

// a type label another bot (with write access) added, which the mailbox never saw
// arrive, is not taken as the type at an assignment the poll derived: another bot's state label
// acts on nothing, whatever its access.
func TestAnotherBotsUnseenTypeLabelIsNotTakenAtADerivedAssignment(t *testing.T) {
	t.Parallel()
	b := setup(t) // no type label; the issue is alice's
	b.fake.SetAccess(repo, "renovate-bot", true)
	b.fake.SetIssueLabels(b.ref, "renovate-bot", "type::question")
	ev := assign("alice")
	ev.Action = "reconcile" // derived by the poll: no delivery told of the label
	b.deliver(ev)
	mb := b.advance()
	require.Equal(t, "", mb.Type, "another bot's type label was taken as the type")
	require.Equal(t, mailbox.StateWaitingType, mb.State)
}

// the rebuild takes a status or type label only when the label history shows the bot
// or an account with the state_label role adding it; another bot's label acts on nothing, now or
// later, whatever its access: it is not taken as state by the rebuild either.
func TestRebuildDoesNotTakeAnotherBotsStatusLabel(t *testing.T) {
	t.Parallel()
	fake := forgetest.NewFake(forge.KindGitLab)
	fake.AddUser("alice")
	fake.AddRepo(repo, "main", "/nonexistent.git")
	fake.SetAccess(repo, "alice", true)
	fake.SetAccess(repo, "renovate-bot", true)
	n := fake.AddIssue(repo, forgetest.SeedIssue{Title: "Export", Author: "alice", Assignees: []string{forgetest.BotLogin}})
	ref := forge.IssueRef{Forge: "gl", Repo: repo, Number: n}
	fake.SetIssueLabels(ref, "alice", "type::task")
	fake.AddComment(ref, forgetest.BotLogin, mailbox.Marker("ack-1", "ack")+"\nThanks @alice, I am on it.")
	fake.SetIssueLabels(ref, "renovate-bot", "type::task", "status::in_development")
	is, err := fake.Issue(t.Context(), ref)
	require.NoError(t, err)
	is.Ref = ref
	rb, err := mailbox.DeriveMailbox(t.Context(), mailbox.Bot{Forge: fake, Login: forgetest.BotLogin}, mailbox.Config{}, is, time.Now())
	require.NoError(t, err)
	require.NotNil(t, rb)
	require.Contains(t, rb.Untrusted, "status::in_development", "another bot's status label was taken as state")
	require.NotEqual(t, mailbox.StateInDevelopment, rb.Mailbox.State)
}
