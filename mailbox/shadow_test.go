package mailbox_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// forgeWrites are the Fake's methods that change the forge.
var forgeWrites = map[string]bool{"Comment": true, "EditComment": true, "SetIssueBody": true, "SetLabels": true,
	"EnsureLabels": true, "SetAssignees": true, "CreateMergeRequest": true, "Reply": true, "ResolveThread": true,
	"PostReview": true, "Merge": true}

// writes counts the calls that changed the fake forge.
func (b *bundle) writes() int {
	n := 0
	for _, c := range b.fake.Calls() {
		if forgeWrites[c.Method] {
			n++
		}
	}
	return n
}

// setupShadow is setup with the forge wrapped as cmd/alfred wires it (mailbox.Shadow under
// mailbox.GuardPosts) and the project in shadow mode while shadow is true.
func setupShadow(t *testing.T, labels ...string) (*bundle, *mailboxtest.ShadowLog, *atomic.Bool) {
	t.Helper()
	b := setup(t, labels...)
	var shadow atomic.Bool
	shadow.Store(true)
	log := mailboxtest.NewShadowLog(b.clock.Now)
	on := func(string) bool { return shadow.Load() }
	f := mailbox.GuardPosts(mailbox.Shadow(b.fake, mailbox.ShadowConfig{Forge: "gl", BotLogin: forgetest.BotLogin, On: on, Log: log}),
		mailbox.PostGuard{})
	cfg := mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, ShadowLog: log,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{Shadow: shadow.Load()} }}
	b.bots = map[string]mailbox.Bot{"gl": {Forge: f, Login: forgetest.BotLogin}}
	b.machine = mailbox.NewMachine(cfg, b.store, b.bots, b.exec, b.clock.Now, b.log)
	return b, log, &shadow
}

// shadowKinds lists the kinds of the writes recorded, in order.
func shadowKinds(ws []mailbox.ShadowWrite) []mailbox.ShadowKind {
	var out []mailbox.ShadowKind
	for _, w := range ws {
		out = append(out, w.Kind)
	}
	return out
}

func TestShadowLifecycleWritesNothingThenLivePosts(t *testing.T) {
	t.Parallel()
	b, log, shadow := setupShadow(t, "type::task")
	ctx := context.Background()

	b.deliver(assign("alice")) // the harness assigns the bot on the fake: a human's write
	base := b.writes()
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Equal(t, base, b.writes(), "shadow mode writes nothing to the forge")
	require.Empty(t, b.comments())
	require.Empty(t, b.status())

	// The machine reads its own writes back: the issue as it would be.
	is, err := b.bots["gl"].Forge.Issue(ctx, b.ref)
	require.NoError(t, err)
	require.Contains(t, is.Labels, "status::waiting_info")
	require.Contains(t, is.Assignees, "alice", "the author is assigned: their turn")
	cs, err := b.bots["gl"].Forge.Comments(ctx, b.ref)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Contains(t, cs[0].Body, "Thanks @alice, I am on it")
	require.Contains(t, cs[1].Body, "### q1. Which separator?")
	require.Negative(t, cs[1].ID, "a synthetic id")

	// A human reads the questions on the pages and answers on the forge.
	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, base, b.writes())
	require.Equal(t, "We need a CSV export.", b.fake.IssueBody(b.ref), "the description is the forge's")
	is, err = b.bots["gl"].Forge.Issue(ctx, b.ref)
	require.NoError(t, err)
	require.Contains(t, is.Body, "| q1. Which separator? | b. Semicolon | @alice |")
	cs, err = b.bots["gl"].Forge.Comments(ctx, b.ref)
	require.NoError(t, err)
	require.Contains(t, cs[1].Body, "**Answered by @alice.**", "the question block, edited in place")

	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb = b.advance()
	require.Equal(t, mailbox.StateInDevelopment, mb.State, "shadow mode starts no run that pushes")
	require.Equal(t, base, b.writes())
	for _, j := range b.exec.jobs {
		require.True(t, j.Input.Phase.ReadOnly(), "only read-only phases run in shadow: %s", j.Input.Phase)
	}
	b.clock.Add(2 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInDevelopment, mb.State)
	ws := log.All()
	runs := 0
	for _, w := range ws {
		if w.Kind == mailbox.ShadowRun {
			runs++
			require.Equal(t, "development", w.Detail["phase"])
		}
	}
	require.Equal(t, 1, runs, "the held run is recorded once")
	kinds := shadowKinds(ws)
	require.Contains(t, kinds, mailbox.ShadowEnsureLabels)
	require.Contains(t, kinds, mailbox.ShadowAssignees)
	require.Contains(t, kinds, mailbox.ShadowIssueBody)
	require.Equal(t, base, b.writes())

	// Live: the next pass runs the development and posts on the forge; nothing of the shadow
	// history is replayed.
	shadow.Store(false)
	before := len(log.All())
	b.clock.Add(2 * time.Minute)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, []string{"status::in_ci"}, b.status())
	require.NotZero(t, mb.MRNumber)
	require.Positive(t, mb.MRNumber)
	require.Equal(t, before, len(log.All()), "live mode records nothing")
	all := strings.Join(b.comments(), "\n")
	require.Contains(t, all, "I opened merge request")
	require.NotContains(t, all, "### q1. Which separator?", "the shadow questions are not replayed")
	require.Equal(t, phase.Development, b.exec.jobs[len(b.exec.jobs)-1].Input.Phase)
	b.requireUniqueMarkers()
}

func TestShadowCommentIsPostedAnewOnceLive(t *testing.T) {
	t.Parallel()
	b, _, shadow := setupShadow(t, "type::task")
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Empty(t, b.comments())

	// Live while the questions wait: the answered question block, posted in shadow under a
	// synthetic id, is posted on the forge rather than edited.
	shadow.Store(false)
	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	all := strings.Join(b.comments(), "\n")
	require.Contains(t, all, "**Answered by @alice.**")
	require.NotContains(t, all, "Thanks @alice, I am on it", "the acknowledgement is not replayed")
	require.Equal(t, []string{"status::waiting_validation"}, b.status())
	b.requireUniqueMarkers()
}
