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

// A review request on a merge request that is not Alfred's starts work as an assignment does:
// a non-writer's request passes the gate (gate.Assign), is refused, and the refusal is said
// once per person and merge request however often they ask.
func TestForeignReviewRequestOfANonWriterIsRefusedOnce(t *testing.T) {
	t.Parallel()
	var refused []string
	b := setupWith(t, guard{config: mailbox.Config{Refused: func(kind, reason string) { refused = append(refused, kind+" "+reason) }}})
	n := b.fake.AddMergeRequest(repo, "feature", "main", "Feature", "mallory")
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: n, MergeRequest: true}
	for range 3 {
		b.deliver(forge.Event{Type: forge.EventReviewRequested, Target: mr, Sender: forge.User{Login: "mallory"},
			ReviewRequested: []string{forgetest.BotLogin}})
	}
	mb, err := b.store.Find(t.Context(), mr)
	require.NoError(t, err)
	require.NoError(t, b.machine.Advance(t.Context(), mb))
	cs, err := b.fake.Comments(t.Context(), mr)
	require.NoError(t, err)
	said := 0
	for _, c := range cs {
		if strings.Contains(c.Body, "@mallory, only a project member with write access can ask me for a review") {
			said++
		}
	}
	require.Equal(t, 1, said, "one refusal for three requests")
	require.Equal(t, []string{"assign role_below_write", "assign role_below_write", "assign role_below_write"}, refused,
		"each request is counted as the gate's refusal")
	require.Equal(t, mailbox.StateIdle, mb.State, "no review is due")
}

// Another bot's labels act on nothing, even when the bot has write access: its ai::auto_merge
// never merges (the label history names the bot, who passes a write check), and a type label
// it added before the assignment is not taken as the type.
func TestAnotherBotsLabelsSteerNothingLater(t *testing.T) {
	t.Parallel()
	t.Run("auto-merge", func(t *testing.T) {
		b, mb := setupAutoMerge(t, mailbox.Config{})
		b.fake.AddUser("renovate-bot")
		b.fake.SetAccess(repo, "renovate-bot", true)
		b.fake.SetIssueLabels(b.ref, "renovate-bot", append(b.fake.IssueLabels(b.ref), "ai::auto_merge")...)
		b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "renovate-bot", Bot: true}, LabelsKnown: true,
			Labels: b.fake.IssueLabels(b.ref)})
		b.advance()
		b.fake.AddReview(repo, mb.MRNumber, "alice", "approved", "")
		b.poll()
		b.poll()
		require.Zero(t, b.merges(), "another bot's label turns auto-merge on for nobody")
	})
	t.Run("type", func(t *testing.T) {
		b := setup(t)
		b.fake.AddUser("triage-bot")
		b.fake.SetAccess(repo, "triage-bot", false)
		b.fake.SetIssueLabels(b.ref, "triage-bot", append(b.fake.IssueLabels(b.ref), "type::question")...)
		b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "triage-bot", Bot: true}, LabelsKnown: true,
			Labels: b.fake.IssueLabels(b.ref)})
		b.advance()
		b.deliver(assign("alice"))
		mb := b.advance()
		require.Equal(t, "", mb.Type, "the bot's type label is not the type")
		require.Equal(t, mailbox.StateWaitingType, mb.State)
	})
}

// Each label of one change acts on its own: a writer's ai::validate_plan and status::blocked
// in one change (GitLab's "/label ~ai::validate_plan ~status::blocked") validate the plan and
// hold what it started, whatever order the forge lists them in.
func TestEveryLabelOfOneChangeActs(t *testing.T) {
	t.Parallel()
	for _, labels := range [][]string{{"ai::validate_plan", "status::blocked"}, {"status::blocked", "ai::validate_plan"}} {
		t.Run(strings.Join(labels, "+"), func(t *testing.T) {
			b := setupReview(t)
			b.deliver(assign("alice"))
			b.advance()
			b.deliver(comment("alice", "q1: b"))
			require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
			b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
				Labels: append(b.fake.IssueLabels(b.ref), labels...)})
			mb := b.advance()
			require.Equal(t, mailbox.StateBlocked, mb.State)
			out := b.store.(interface{ Outcomes(int64) []string }).Outcomes(mb.ID)
			require.Equal(t, "plan validated; blocked by a human", out[len(out)-1])
			require.Equal(t, mailbox.StateInDevelopment, mb.Data.BlockedFrom, "the hold keeps the validated plan's development")
		})
	}
}

// A review asked in the same delivery as something else (GitLab: a merge request opened with
// the bot among its reviewers, or an assignee and a reviewer added by one note) starts the
// review as a review_requested event does.
func TestReviewAskedWithOtherChangesStartsTheReview(t *testing.T) {
	t.Parallel()
	for _, typ := range []forge.EventType{forge.EventMergeRequestOpened, forge.EventAssignees} {
		t.Run(string(typ), func(t *testing.T) {
			b := setup(t)
			n := b.fake.AddMergeRequest(repo, "feature", "main", "Feature", "alice")
			mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: n, MergeRequest: true}
			ev := forge.Event{Type: typ, Target: mr, Sender: forge.User{Login: "alice"}, ReviewRequested: []string{forgetest.BotLogin}}
			if typ == forge.EventAssignees {
				ev.AssigneesKnown, ev.Assignees = true, []string{"alice"}
			}
			b.deliver(ev)
			mb, err := b.store.Find(t.Context(), mr)
			require.NoError(t, err)
			require.NoError(t, b.machine.AdvanceEvents(t.Context(), mb, busySlots{}))
			out := b.store.(interface{ Outcomes(int64) []string }).Outcomes(mb.ID)
			require.Equal(t, "review asked by @alice", out[len(out)-1])
		})
	}
}

// On Forgejo a member of a triage team may edit anyone's comment. An edit whose delivery named
// them, and which the gate refused, is not taken when reconciliation later finds it and can
// only attribute it to the comment's author (or, for Alfred's question block, the issue's).
func TestARefusedEditIsNotTakenInTheAuthorsName(t *testing.T) {
	t.Parallel()
	t.Run("question block", func(t *testing.T) {
		b := setup(t, "type::task")
		b.fake.SetClock(b.clock.Now())
		b.deliver(assign("alice"))
		b.advance()
		block, id := b.lastComment(), b.lastCommentID()
		edited := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
		require.NotEqual(t, block, edited)
		require.NoError(t, b.fake.EditComment(t.Context(), b.ref, id, edited))
		b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "mallory"},
			Comment: &forge.Comment{ID: id, Body: edited}})
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "refused for mallory")
		b.clock.Add(time.Minute)
		b.reconcile()
		mb := b.advance()
		require.Equal(t, mailbox.StateWaitingInfo, mb.State, "mallory's edit does not answer in alice's name")
		out := b.store.(interface{ Outcomes(int64) []string }).Outcomes(mb.ID)
		require.Contains(t, out, "ignored: an edit the gate refused when it was delivered")
	})
	t.Run("the author's reply", func(t *testing.T) {
		b := setup(t, "type::task")
		b.fake.SetClock(b.clock.Now())
		b.deliver(assign("alice"))
		b.advance()
		id := b.fake.AddComment(b.ref, "alice", "Let me check with accounting.")
		b.deliver(forge.Event{Type: forge.EventComment, Sender: forge.User{Login: "alice"},
			Comment: &forge.Comment{ID: id, Body: "Let me check with accounting."}})
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
		next := b.fake.AddComment(b.ref, "alice", "Asking them now.")
		b.deliver(forge.Event{Type: forge.EventComment, Sender: forge.User{Login: "alice"},
			Comment: &forge.Comment{ID: next, Body: "Asking them now."}})
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
		b.clock.Add(time.Minute)
		b.reconcile() // it has seen alice's comments as she wrote them
		b.advance()
		require.NoError(t, b.fake.EditComment(t.Context(), b.ref, id, "b"))
		b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "mallory"},
			Comment: &forge.Comment{ID: id, Body: "b"}})
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "refused for mallory")
		b.clock.Add(time.Minute)
		b.reconcile()
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "mallory's edit does not answer in alice's name")
	})
}
