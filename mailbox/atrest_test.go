package mailbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// restSetups brings a bundle's issue to each state at rest the way the forge would: idle after
// a first comment, cancelled after an unassignment with the questions open, done after the
// issue closed with the questions open.
var restSetups = map[mailbox.State]func(b *bundle){
	mailbox.StateIdle: func(b *bundle) {
		b.deliver(comment("alice", "Is anyone on this?"))
		b.advance()
	},
	mailbox.StateCancelled: func(b *bundle) {
		b.deliver(assign("alice"))
		b.advance()
		b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true})
		b.advance()
	},
	mailbox.StateDone: func(b *bundle) {
		b.deliver(assign("alice"))
		b.advance()
		b.deliver(forge.Event{Type: forge.EventIssueClosed, Sender: forge.User{Login: "alice"}})
		b.advance()
	},
}

// What the store records on arrival without a pass (mailbox.InertAtRest in a state of
// mailbox.RestStates) must be what a pass would do: nothing. Each inert event, applied by the
// machine to a mailbox in each state at rest an hour later, changes neither the mailbox (its
// state, labels, title, author, memory) nor the forge (comments, the status comment included,
// labels, assignees), and starts no run. The answers, the
// retries and the ticks among them act in a working state (the case "working" shows the
// comparison sees an answer's effect), so the test fails if a working state is taken for one at
// rest.
func TestInertEventsChangeNothingAtRest(t *testing.T) {
	t.Parallel()
	rest := mailbox.RestStates()
	require.ElementsMatch(t, []string{"idle", "done", "cancelled"}, rest)
	events := map[string]func(b *bundle) forge.Event{
		"an answer":             func(*bundle) forge.Event { return comment("alice", "q1: b") },
		"a retry":               func(*bundle) forge.Event { return comment("alice", "@"+forgetest.BotLogin+" retry") },
		"a non-writer's answer": func(*bundle) forge.Event { return comment("mallory", "q1: b") },
		"a bot's comment":       func(*bundle) forge.Event { return comment("reader[bot]", "q1: b") },
		"Alfred's own comment":  func(*bundle) forge.Event { return comment(forgetest.BotLogin, "q1: b") },
		"a thank-you in emoji":  func(*bundle) forge.Event { return comment("alice", "🙏") },
		"ticks in the question block": func(b *bundle) forge.Event {
			// The forge reports a tick in Alfred's comment as the human's edit of it; at idle
			// Alfred has written nothing, and a comment of the human's is edited.
			c := forge.Comment{ID: 1, Body: "- [ ] **b. Semicolon**"}
			if cs := b.fake.IssueComments(b.ref); len(cs) > 0 {
				c = forge.Comment{ID: cs[len(cs)-1].ID, Body: cs[len(cs)-1].Body}
			}
			c.Body = strings.Replace(c.Body, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
			return forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"}, Comment: &c}
		},
	}
	t.Run("working", func(t *testing.T) {
		// The comparison sees what an answer does in a working state.
		t.Parallel()
		b := setup(t, "type::task")
		b.deliver(assign("alice"))
		before := b.advance()
		require.Equal(t, mailbox.StateWaitingInfo, before.State)
		forgeBefore := b.forgeSnapshot()
		b.deliver(events["an answer"](b))
		after := b.advance()
		require.NotEqual(t, before.State, after.State)
		require.NotEqual(t, forgeBefore, b.forgeSnapshot())
	})
	for _, st := range rest {
		for name, ev := range events {
			t.Run(st+"/"+name, func(t *testing.T) {
				t.Parallel()
				usage := &jobUsage{cost: 0.01}
				b := setupWith(t, guard{config: mailbox.Config{Usage: usage}}, "type::task")
				usage.exec = b.exec
				b.fake.AddUser("reader[bot]")
				restSetups[mailbox.State(st)](b)
				before := b.advance()
				require.Equal(t, mailbox.State(st), before.State)
				forgeBefore, runs := b.forgeSnapshot(), b.runsStarted()
				b.clock.Add(time.Hour) // a status comment that follows the clock would change

				e := b.delivery(ev(b))
				e.Title, e.Author = before.Title, forge.User{Login: before.Author} // as a forge sends them
				require.True(t, mailbox.InertAtRest(e), "the event is one the store records on arrival")
				dup, err := b.store.Deliver(context.Background(), e)
				require.NoError(t, err)
				require.False(t, dup)
				after := b.advance()
				require.Equal(t, before.State, after.State)
				require.Equal(t, before.Labels, after.Labels)
				require.Equal(t, before.Title, after.Title)
				require.Equal(t, before.Author, after.Author)
				require.JSONEq(t, mustJSON(t, before.Data), mustJSON(t, after.Data), "the mailbox's memory")
				require.Equal(t, forgeBefore, b.forgeSnapshot(), "the forge")
				require.Equal(t, runs, b.runsStarted(), "no run")
			})
		}
	}
	// A comment on a merge request is not inert: the review loop reads it.
	onMR := comment("alice", "please rename this")
	onMR.Target = forge.IssueRef{Forge: "gl", Repo: repo, Number: 7, MergeRequest: true}
	require.False(t, mailbox.InertAtRest(onMR))
	for _, typ := range []forge.EventType{forge.EventAssignees, forge.EventLabels, forge.EventIssueEdited, forge.EventIssueClosed, forge.EventReviewRequested} {
		require.False(t, mailbox.InertAtRest(forge.Event{Type: typ}), "%s acts at rest or records something", typ)
	}
}

// forgeSnapshot is what the forge shows of the bundle's issue: its comments, labels and
// assignees.
func (b *bundle) forgeSnapshot() string {
	labels, assignees := slices.Clone(b.fake.IssueLabels(b.ref)), slices.Clone(b.fake.IssueAssignees(b.ref))
	slices.Sort(labels)
	slices.Sort(assignees)
	return fmt.Sprintf("%s\nlabels %q\nassignees %q", b.commentsOf(b.ref), labels, assignees)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

// The receiver's inbox wakes the workers for an event that waits for a pass, and not for one
// the store recorded on arrival: the mailbox's first comment waits, the next is recorded, an
// assignment waits; in a working state every comment waits.
func TestWakingInboxWakesOnlyForPendingEvents(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", Count: 1, Poll: time.Hour, LeaseTTL: time.Minute},
		b.store, b.machine, slog.New(slog.NewTextHandler(io.Discard, nil)))
	inbox := mailbox.WakingInbox{Inbox: b.store, Workers: w}
	deliver := func(ev forge.Event) bool {
		t.Helper()
		dup, err := inbox.Deliver(context.Background(), b.delivery(ev))
		require.NoError(t, err)
		require.False(t, dup)
		return w.Woken()
	}
	require.True(t, deliver(comment("alice", "Is anyone on this?")), "the mailbox's first event")
	b.advance()
	require.False(t, deliver(comment("alice", "Anyone?")), "a comment at rest")
	require.False(t, deliver(comment("alice", "q1: b")), "an answer with no question open")
	require.True(t, deliver(assign("alice")), "the assignment")
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	require.True(t, deliver(comment("alice", "Anyone?")), "a comment while Alfred works")
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	require.True(t, deliver(comment("alice", "q1: b")), "the answer")
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
}
