package mailbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

type deriveBundle struct {
	fake *forgetest.Fake
	ref  forge.IssueRef
	view mailbox.ReconcileView
	now  time.Time
}

func setupDerive(t *testing.T) *deriveBundle {
	t.Helper()
	f := forgetest.NewFake(forge.KindForgejo)
	f.AddRepo("acme/shop", "main", "file:///srv/acme/shop.git")
	f.AddUser("alice")
	n := f.AddIssue("acme/shop", forgetest.SeedIssue{Title: "Fix it", Author: "alice",
		Labels: []string{"type::task", "status::waiting_validation"}, Assignees: []string{"alice", forgetest.BotLogin}})
	ref := forge.IssueRef{Forge: "fj", Repo: "acme/shop", Number: n}
	is, err := f.Issue(t.Context(), ref)
	require.NoError(t, err)
	return &deriveBundle{fake: f, ref: ref, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), view: mailbox.ReconcileView{
		MailboxID: 7, Ref: ref, Author: "alice", Labels: is.Labels, Assignees: is.Assignees,
		IssueUpdatedAt: is.UpdatedAt, CommentsSince: is.UpdatedAt.Add(time.Second),
	}}
}

func (b *deriveBundle) derive(t *testing.T) mailbox.Derived {
	t.Helper()
	d, err := mailbox.DeriveEvents(t.Context(), b.fake, forgetest.BotLogin, b.view, b.now)
	require.NoError(t, err)
	return d
}

func TestDeriveUnchangedIssueCostsOneCall(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	d := b.derive(t)
	require.Empty(t, d.Events)
	require.Equal(t, 1, d.Calls)
}

func TestDeriveMissedLabelNamesWhoAddedIt(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	b.fake.SetIssueLabels(b.ref, "alice", "type::task", "status::waiting_validation", "ai::validate_plan")
	d := b.derive(t)
	require.Len(t, d.Events, 1)
	ev := d.Events[0]
	require.Equal(t, forge.EventLabels, ev.Type)
	require.True(t, ev.LabelsKnown)
	require.Contains(t, ev.Labels, "ai::validate_plan")
	require.Equal(t, "alice", ev.Sender.Login, "permissions are checked against who added it")
	require.Contains(t, ev.DeliveryID, "reconcile:")
	require.True(t, d.IssueUpdatedAt.After(b.view.IssueUpdatedAt))

	again := b.derive(t)
	require.Equal(t, ev.DeliveryID, again.Events[0].DeliveryID, "the same finding twice is one delivery")
	require.Equal(t, ev.BodyHash, again.Events[0].BodyHash)
}

func TestDeriveMissedUnassignAndClose(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	b.fake.SetIssueAssignees(b.ref, "alice", "alice")
	b.fake.SetIssueState(b.ref, "alice", "closed")
	d := b.derive(t)
	var types []forge.EventType
	for _, ev := range d.Events {
		types = append(types, ev.Type)
		require.Equal(t, "alice", ev.Sender.Login)
	}
	require.Equal(t, []forge.EventType{forge.EventAssignees, forge.EventIssueClosed}, types)
	require.Equal(t, []string{"alice"}, d.Events[0].Assignees)
}

func TestDeriveMissedAnswerOnce(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	id := b.fake.AddComment(b.ref, "alice", "q1: b")
	d := b.derive(t)
	require.Len(t, d.Events, 1)
	require.Equal(t, forge.EventComment, d.Events[0].Type)
	require.Equal(t, id, d.Events[0].Comment.ID)
	require.Equal(t, "alice", d.Events[0].Sender.Login)

	b.view.IssueUpdatedAt, b.view.CommentsSince = d.IssueUpdatedAt, d.CommentsSince.Add(time.Second)
	require.Empty(t, b.derive(t).Events, "read from where the last pass stopped")
}

func TestDeriveMissedMerge(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	mr, err := b.fake.CreateMergeRequest(t.Context(), "acme/shop", forge.NewMergeRequest{SourceBranch: "agent/1-fix", TargetBranch: "main", Title: "Fix"})
	require.NoError(t, err)
	b.view.MRNumber, b.view.HeadSHA = mr.Number, mr.HeadSHA
	first := b.derive(t)
	require.Empty(t, first.Events)
	b.view.MRUpdatedAt = first.MRUpdatedAt
	require.Equal(t, 2, b.derive(t).Calls, "issue and merge request, nothing else when unchanged")

	b.fake.MarkMerged("acme/shop", mr.Number)
	d := b.derive(t)
	require.Len(t, d.Events, 1)
	require.Equal(t, forge.EventMergeRequestMerged, d.Events[0].Type)
	require.True(t, d.Events[0].Target.MergeRequest)
	require.Equal(t, mr.Number, d.Events[0].Target.Number)
}

func TestDeriveMissedAssignment(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	n := b.fake.AddIssue("acme/shop", forgetest.SeedIssue{Title: "New", Author: "alice"})
	fresh := forge.IssueRef{Forge: "fj", Repo: "acme/shop", Number: n}
	b.fake.SetIssueAssignees(fresh, "alice", forgetest.BotLogin)
	tracked := func(is forge.Issue) (bool, error) { return is.Ref == b.ref, nil }
	d, err := mailbox.DeriveAssignments(t.Context(), b.fake, "fj", forgetest.BotLogin, time.Time{}, 0, tracked, b.now)
	require.NoError(t, err)
	require.Len(t, d.Events, 1, "only the issue without a mailbox")
	ev := d.Events[0]
	require.Equal(t, fresh, ev.Target)
	require.Equal(t, forge.EventAssignees, ev.Type)
	require.Equal(t, []string{forgetest.BotLogin}, ev.Assignees)
	require.Equal(t, "alice", ev.Sender.Login)
}

// Label changes by several people between two looks are one event per person, in order, each
// with the labels as that person left them: the gate judges each person's labels under their
// own role. A reader's ai::validate_plan followed by a writer's type::bug is not the writer's;
// a writer's removal of status::blocked after a reader's label is the writer's.
func TestDeriveMissedLabelsOfSeveralPeople(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	b.fake.AddUser("rita")
	b.fake.AddUser("wendy")
	b.fake.SetIssueLabels(b.ref, "rita", "type::task", "status::waiting_validation", "ai::validate_plan")
	b.fake.SetIssueLabels(b.ref, "wendy", "type::task", "status::waiting_validation", "ai::validate_plan", "type::bug")
	d := b.derive(t)
	require.Len(t, d.Events, 2)
	require.Equal(t, "rita", d.Events[0].Sender.Login)
	require.ElementsMatch(t, []string{"type::task", "status::waiting_validation", "ai::validate_plan"}, d.Events[0].Labels)
	require.Equal(t, "wendy", d.Events[1].Sender.Login)
	require.ElementsMatch(t, []string{"type::task", "status::waiting_validation", "ai::validate_plan", "type::bug"}, d.Events[1].Labels)
	require.NotEqual(t, d.Events[0].DeliveryID, d.Events[1].DeliveryID)

	again := b.derive(t)
	require.Len(t, again.Events, 2)
	require.Equal(t, d.Events[0].DeliveryID, again.Events[0].DeliveryID, "the same finding twice is one delivery")
	require.Equal(t, d.Events[1].DeliveryID, again.Events[1].DeliveryID)
}

// setupDeriveMR seeds, on a Fake of kind, an issue of o/r assigned to the bot and the bot's
// merge request, and returns the view a look that just saw both would have.
func setupDeriveMR(t *testing.T, kind forge.Kind) (*forgetest.Fake, mailbox.ReconcileView, int64) {
	t.Helper()
	f := forgetest.NewFake(kind)
	f.AddRepo("o/r", "main", "")
	f.AddUser("alice")
	n := f.AddIssue("o/r", forgetest.SeedIssue{Title: "t", Author: "alice", Assignees: []string{forgetest.BotLogin}})
	ref := forge.IssueRef{Forge: "f", Repo: "o/r", Number: n}
	mrn := f.AddMergeRequest("o/r", "agent/issue-1", "main", "Fix", forgetest.BotLogin)
	is, err := f.Issue(t.Context(), ref)
	require.NoError(t, err)
	mr, err := f.MergeRequest(t.Context(), "o/r", mrn)
	require.NoError(t, err)
	return f, mailbox.ReconcileView{MailboxID: 1, Ref: ref, Author: "alice", Labels: is.Labels, Assignees: is.Assignees,
		MRNumber: mrn, HeadSHA: mr.HeadSHA, IssueUpdatedAt: is.UpdatedAt, MRUpdatedAt: mr.UpdatedAt, CommentsSince: is.UpdatedAt}, mrn
}

// Reconciliation reads no review comments, so it must leave the merge request's change for the
// poll: a review it saw move the merge request is still derived by the next poll, on both
// forges.
func TestReconciliationLeavesAReviewToThePoll(t *testing.T) {
	t.Parallel()
	for _, kind := range []forge.Kind{forge.KindForgejo, forge.KindGitLab} {
		t.Run(string(kind), func(t *testing.T) {
			f, v, mrn := setupDeriveMR(t, kind)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			f.AddReview("o/r", mrn, "alice", "changes_requested", "One thing.",
				forgetest.SeedReviewComment{Path: "widget.go", NewLine: 1, Body: "Please rename."})

			rec, err := mailbox.DeriveEvents(t.Context(), f, forgetest.BotLogin, v, now)
			require.NoError(t, err)
			require.Empty(t, rec.Events, "reconciliation does not read review comments")
			require.Equal(t, v.MRUpdatedAt, rec.MRUpdatedAt, "and leaves the merge request's change unread")

			poll := v
			poll.IssueUpdatedAt, poll.MRUpdatedAt, poll.CommentsSince = rec.IssueUpdatedAt, rec.MRUpdatedAt, rec.CommentsSince
			poll.ReviewComments = true
			d, err := mailbox.DeriveEvents(t.Context(), f, forgetest.BotLogin, poll, now)
			require.NoError(t, err)
			require.NotEmpty(t, d.Events, "the poll after the reconciliation derives the review")
			require.True(t, d.MRUpdatedAt.After(v.MRUpdatedAt), "the poll passes the change it read")
		})
	}
}

// Forgejo stores times to the second: a comment made later in the second of a look leaves the
// issue's updated time equal to what that look stored. While the time is recent the look keeps
// the time seen before, so the next look reads the comment, however late it comes.
func TestACommentInTheSecondOfTheLookIsRead(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	b.fake.SetClock(t0)
	b.fake.AddComment(b.ref, "alice", "first") // at t0+1s
	b.now = t0.Add(1500 * time.Millisecond)    // the look, in the same second
	d := b.derive(t)
	require.Len(t, d.Events, 1)
	require.Equal(t, b.view.IssueUpdatedAt, d.IssueUpdatedAt, "a time within UpdatedSettle is not stored")
	b.view.IssueUpdatedAt, b.view.CommentsSince = d.IssueUpdatedAt, d.CommentsSince

	b.fake.SetClock(t0)
	id := b.fake.AddComment(b.ref, "alice", "q1: b") // the same second again, after the look
	b.now = t0.Add(time.Hour)                        // the next look, long after
	d = b.derive(t)
	var ids []int64
	for _, ev := range d.Events {
		ids = append(ids, ev.Comment.ID)
	}
	require.Contains(t, ids, id, "the comment of the look's second is read")
	require.Equal(t, t0.Add(time.Second), d.IssueUpdatedAt, "a settled time is stored")

	b.view.IssueUpdatedAt, b.view.CommentsSince = d.IssueUpdatedAt, d.CommentsSince
	d = b.derive(t)
	require.Equal(t, 1, d.Calls, "an unchanged settled issue costs one call again")
}

// Forgejo leaves an issue's updated time alone when a comment is edited, and notifies nobody:
// a tick in the bot's question block is read while the mailbox waits for answers, and only then.
func TestATickInTheQuestionBlockIsReadWhileAsking(t *testing.T) {
	t.Parallel()
	b := setupDerive(t)
	block := mailbox.Marker("questions-1", "questions") + "\n### q1. Which?\n- [ ] **a. X**\n- [ ] **b. Y**"
	id, err := b.fake.Comment(t.Context(), b.ref, block)
	require.NoError(t, err)
	is, err := b.fake.Issue(t.Context(), b.ref)
	require.NoError(t, err)
	b.view.IssueUpdatedAt, b.view.CommentsSince = is.UpdatedAt, is.UpdatedAt
	b.view.OwnBody = func(_, body string) bool { return body == block }
	require.NoError(t, b.fake.EditComment(t.Context(), b.ref, id, strings.Replace(block, "- [ ] **b.", "- [x] **b.", 1)))
	after, err := b.fake.Issue(t.Context(), b.ref)
	require.NoError(t, err)
	require.Equal(t, is.UpdatedAt, after.UpdatedAt, "the stand-in keeps Forgejo's updated time on an edit")

	require.Empty(t, b.derive(t).Events, "not asking: an unchanged issue is not read")
	b.view.Asking = true
	d := b.derive(t)
	require.Len(t, d.Events, 1)
	require.Equal(t, forge.EventCommentEdited, d.Events[0].Type)
	require.Equal(t, "alice", d.Events[0].Sender.Login)
}

// A comment in the bot's merge request's conversation that addresses the bot asks for a
// review_fix when it is delivered; the poll derives it too, on Forgejo (whose review calls do
// not list the conversation) as on GitLab.
func TestThePollReadsTheMergeRequestConversation(t *testing.T) {
	t.Parallel()
	for _, kind := range []forge.Kind{forge.KindForgejo, forge.KindGitLab} {
		t.Run(string(kind), func(t *testing.T) {
			f, v, mrn := setupDeriveMR(t, kind)
			v.ReviewComments = true
			id := f.AddComment(forge.IssueRef{Repo: "o/r", Number: mrn, MergeRequest: true}, "alice",
				"@"+forgetest.BotLogin+" please also rename the helper")
			d, err := mailbox.DeriveEvents(t.Context(), f, forgetest.BotLogin, v, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			require.NoError(t, err)
			require.Len(t, d.Events, 1)
			ev := d.Events[0]
			require.Equal(t, forge.EventComment, ev.Type)
			require.True(t, ev.Target.MergeRequest)
			require.Equal(t, id, ev.Comment.ID)
			require.Equal(t, "alice", ev.Sender.Login)
		})
	}
}
