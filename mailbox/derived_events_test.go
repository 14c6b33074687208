package mailbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// An assignment derived again after the bot was unassigned and assigned anew is a new delivery
// (its id names the issue's updated time), not a duplicate of the first one.
func TestADerivedReassignmentIsANewDelivery(t *testing.T) {
	b := setupDerive(t)
	n := b.fake.AddIssue("acme/shop", forgetest.SeedIssue{Title: "New", Author: "alice"})
	fresh := forge.IssueRef{Forge: "fj", Repo: "acme/shop", Number: n}
	b.fake.SetIssueAssignees(fresh, "alice", forgetest.BotLogin)
	skip := func(is forge.Issue) (bool, error) { return is.Ref == b.ref, nil }
	d1, err := mailbox.DeriveAssignments(t.Context(), b.fake, "fj", forgetest.BotLogin, time.Time{}, 0, skip, b.now)
	require.NoError(t, err)
	require.Len(t, d1.Events, 1)
	is1, _ := b.fake.Issue(t.Context(), fresh)

	// The lifecycle ends, alice unassigns the bot, and days later assigns it again.
	b.fake.SetIssueAssignees(fresh, "alice")
	b.fake.SetIssueAssignees(fresh, "alice", forgetest.BotLogin)
	is2, _ := b.fake.Issue(t.Context(), fresh)
	require.True(t, is2.UpdatedAt.After(is1.UpdatedAt), "%v %v", is1.UpdatedAt, is2.UpdatedAt)
	d2, err := mailbox.DeriveAssignments(t.Context(), b.fake, "fj", forgetest.BotLogin, time.Time{}, 0, skip, b.now.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, d2.Events, 1)
	require.NotEqual(t, d1.Events[0].DeliveryID, d2.Events[0].DeliveryID, "a new assignment is a new delivery")
}

// A mailbox whose reconciliation fails at every pass (its project's access lost) goes to the back
// of the queue: with a batch of one, another issue's missed close is still derived.
func TestAMailboxThatFailsReconciliationGoesToTheBackOfTheQueue(t *testing.T) {
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	n2 := b.fake.AddIssue(repo, forgetest.SeedIssue{Title: "other", Body: "x", Author: "alice", Labels: []string{"type::task"}})
	b2 := *b
	b2.ref = forge.IssueRef{Forge: "gl", Repo: repo, Number: n2}
	b2.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b2.advance().State)

	// The bot loses access to issue 1's project (404 for the issue and the repository).
	b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
		if ref.Number == b.ref.Number && !ref.MergeRequest || method == "Repository" {
			return fmt.Errorf("%s: 404: %w", method, forge.ErrNotFound)
		}
		return nil
	})
	// Issue 2 is closed; the webhook is lost.
	b.fake.SetIssueState(b2.ref, "alice", "closed")
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Batch: 1}, b.store, b.store, b.bots, b.clock.Now, b.log)
	total := 0
	for i := 0; i < 5; i++ {
		st := r.Pass(context.Background(), 0)
		total += st[0].Events
	}
	require.NotZero(t, total, "issue 2's close is never derived: the lost-access mailbox takes the batch at every pass")
}

// Another bot's ai::auto_merge whose delivery was missed (found by reconciliation), then an
// unrelated label change by a human delivered with GitLab's previous and current lists: the
// bot's label still enables auto-merge for nobody.
func TestAnotherBotsAutoMergeFoundByReconciliationMergesNothing(t *testing.T) {
	b, mb := setupAutoMerge(t, mailbox.Config{})
	b.fake.AddUser("renovate-bot")
	b.fake.SetAccess(repo, "renovate-bot", true)
	b.fake.SetIssueLabels(b.ref, "renovate-bot", append(b.fake.IssueLabels(b.ref), "ai::auto_merge")...)
	// the delivery is lost; reconciliation finds it
	st := mailbox.NewReconciler(mailbox.ReconcilerConfig{}, b.store, b.store, b.bots, b.clock.Now, b.log).Pass(t.Context(), 0)
	require.NoError(t, st[0].Err)
	b.advance()
	// alice (writer) adds an unrelated label, GitLab style (previous and current lists)
	prev := b.fake.IssueLabels(b.ref)
	cur := append(slices.Clone(prev), "priority::high")
	b.fake.SetIssueLabels(b.ref, "alice", cur...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: prev, Labels: cur})
	b.advance()
	b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
	b.poll()
	b.poll()
	require.Zero(t, b.merges(), "another bot's label turns auto-merge on for nobody")
}

// Two label events of one sender folded into one keep the review the first one asked for.
func TestFoldedLabelEventsKeepAReviewRequest(t *testing.T) {
	b := setup(t)
	n := b.fake.AddMergeRequest(repo, "feature", "main", "Feature", "alice")
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: n, MergeRequest: true}
	b.deliver(forge.Event{Type: forge.EventLabels, Target: mr, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: []string{}, Labels: []string{"needs-review"}, ReviewRequested: []string{forgetest.BotLogin}})
	b.deliver(forge.Event{Type: forge.EventLabels, Target: mr, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		PreviousLabels: []string{"needs-review"}, Labels: []string{"needs-review", "backend"}})
	mb, err := b.store.Find(t.Context(), mr)
	require.NoError(t, err)
	require.NoError(t, b.machine.AdvanceEvents(t.Context(), mb, busySlots{}))
	out := b.store.(interface{ Outcomes(int64) []string }).Outcomes(mb.ID)
	require.Contains(t, out, "review asked by @alice")
}

// While asking, a look at an unchanged issue reads its comments, not its history, even when a
// label difference the mailbox never records (another bot's) stands.
func TestAskingReadsOnlyTheComments(t *testing.T) {
	b := setupDerive(t)
	b.fake.AddUser("renovate-bot")
	b.fake.SetIssueLabels(b.ref, "renovate-bot", "type::task", "status::waiting_validation", "dependencies")
	is, _ := b.fake.Issue(t.Context(), b.ref)
	b.view.IssueUpdatedAt = is.UpdatedAt // the look that saw it stored the time; the machine never writes a bot's derived labels
	b.now = is.UpdatedAt.Add(3600e9)
	b.view.Asking = true
	for i := 0; i < 3; i++ {
		d := b.derive(t)
		require.Equal(t, 2, d.Calls, "the issue and its comments, not its history")
	}
}
