package mailbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// poller is a Poller of the bundle's forge "gl" (the Fake, GitLab) over its PostgreSQL store.
func (b *bundle) poller() (*mailbox.Poller, mailbox.PollStore) {
	b.t.Helper()
	ps, ok := b.store.(mailbox.PollStore)
	require.True(b.t, ok, "the SQL store keeps the poll cursors")
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Scopes: map[string]mailbox.Scope{"gl": {AnyRepository: true}}},
		b.store, b.store, b.bots, b.clock.Now, b.log)
	return mailbox.NewPoller(mailbox.PollerConfig{Interval: map[string]time.Duration{"gl": time.Second}}, r, ps,
		map[string]forge.Poller{"gl": b.fake}, b.log), ps
}

// With no delivery at all, the polls carry the issue from the assignment to development: each
// change becomes the event a webhook would have given, once; a failed poll keeps the cursor
// and the next one covers the gap; a comment delivered by a webhook and seen by a poll is
// applied once.
func TestPollWithoutWebhooks(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	p, ps := b.poller()
	ctx := context.Background()
	poll := func() mailbox.PollStats {
		t.Helper()
		st := p.Poll(ctx, "gl")
		require.NoError(t, st.Err)
		return st
	}

	b.fake.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin)
	st := poll()
	require.Equal(t, 1, st.Events, "the assignment")
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	require.Contains(t, b.comments()[0], "Thanks @alice, I am on it")
	require.Zero(t, poll().Events, "a change seen twice is stored once")
	cur, err := ps.PollCursor(ctx, "gl")
	require.NoError(t, err)
	require.False(t, cur.Since.IsZero())

	// The forge is down: the poll fails and keeps its cursor; the answer given meanwhile is
	// found by the next poll.
	b.fake.FailNextCall("Changes", forge.ErrUnavailable)
	failed := p.Poll(ctx, "gl")
	require.ErrorIs(t, failed.Err, forge.ErrUnavailable)
	after, err := ps.PollCursor(ctx, "gl")
	require.NoError(t, err)
	require.True(t, cur.Since.Equal(after.Since), "a failed poll keeps the cursor")
	require.Contains(t, after.Error, "unavailable")
	id := b.fake.AddComment(b.ref, "alice", "q1: b")
	require.Equal(t, 1, poll().Events)
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, "Semicolon", mb.Data.Decisions["q1"])
	technical := len(b.exec.jobs)

	// The webhook of the same comment arrives late: it does not act again.
	b.deliver(forge.Event{Type: forge.EventComment, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: "q1: b"}})
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Equal(t, technical, len(b.exec.jobs), "applied once: no run for a comment applied already")

	// A comment delivered first by its webhook, then seen by a poll: applied once too.
	id = b.fake.AddComment(b.ref, "alice", "Looks good, @"+forgetest.BotLogin+".")
	b.deliver(forge.Event{Type: forge.EventComment, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: "Looks good, @" + forgetest.BotLogin + "."}})
	b.advance()
	before := len(b.comments())
	poll()
	b.advance()
	require.Equal(t, before, len(b.comments()), "no second answer")

	b.fake.SetIssueLabels(b.ref, "alice", append(b.fake.IssueLabels(b.ref), "ai::validate_plan")...)
	require.Equal(t, 1, poll().Events)
	mb = b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Contains(t, strings.Join(b.comments(), "\n"), "Plan validated by @alice.")
	require.Equal(t, 1, b.jobsOf(phase.Development))
	b.requireUniqueMarkers()
}

// BenchmarkPollReaction measures the time from a change on the forge (a comment answering the
// question) to its event stored by the running poller, with a one-second poll interval: at
// most the interval plus 1 s (reported as reaction_max_s beside interval_s).
func BenchmarkPollReaction(b *testing.B) {
	bd := setupPG(b, "type::task")
	ps, _ := bd.store.(mailbox.PollStore)
	stored := make(chan int, 16)
	r := mailbox.NewReconciler(mailbox.ReconcilerConfig{Scopes: map[string]mailbox.Scope{"gl": {AnyRepository: true}}},
		bd.store, bd.store, bd.bots, bd.clock.Now, bd.log)
	interval := time.Second
	p := mailbox.NewPoller(mailbox.PollerConfig{Interval: map[string]time.Duration{"gl": interval},
		OnPoll: func(st mailbox.PollStats) { stored <- st.Events }}, r, ps, map[string]forge.Poller{"gl": bd.fake}, bd.log)
	bd.fake.SetIssueAssignees(bd.ref, "alice", forgetest.BotLogin)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	for n := range stored { // the assignment
		if n > 0 {
			break
		}
	}
	var worst time.Duration
	for i := range b.N {
		changed := time.Now()
		bd.fake.AddComment(bd.ref, "alice", fmt.Sprintf("comment %d", i))
		for n := range stored {
			if n > 0 {
				break
			}
		}
		worst = max(worst, time.Since(changed))
	}
	b.ReportMetric(worst.Seconds(), "reaction_max_s")
	b.ReportMetric(interval.Seconds(), "interval_s")
}

// One thread whose comparison fails at every poll with a lasting error (a 403 on its issue, a
// timeline the forge fails to answer) holds the cursor for a few polls only: then the poll goes
// on without it, the cursor moves, and the other threads' changes are not read again and again
// from a cursor that never moves. The forge's unavailability holds it for as long as it lasts.
func TestAThreadThatAlwaysFailsIsSetAside(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	p, ps := b.poller()
	ctx := context.Background()
	broken := b.fake.AddIssue(repo, forgetest.SeedIssue{Title: "Broken", Author: "alice"})
	brokenRef := forge.IssueRef{Forge: "gl", Repo: repo, Number: broken}
	b.fake.SetIssueAssignees(brokenRef, "alice", forgetest.BotLogin)
	failWith := forge.ErrUnavailable
	b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
		if ref.Number == broken && !ref.MergeRequest {
			return fmt.Errorf("read issue %d: %w", broken, failWith)
		}
		return nil
	})
	for range 2 * mailbox.ThreadSetAside {
		st := p.Poll(ctx, "gl")
		require.ErrorIs(t, st.Err, forge.ErrUnavailable, "unavailable: never set aside")
		require.Zero(t, st.SetAside)
	}
	failWith = forge.ErrForbidden
	for i := range mailbox.ThreadSetAside - 1 {
		st := p.Poll(ctx, "gl")
		require.ErrorIs(t, st.Err, forge.ErrForbidden, "poll %d keeps the cursor", i+1)
	}
	before, err := ps.PollCursor(ctx, "gl")
	require.NoError(t, err)
	b.fake.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin) // the other thread's change
	st := p.Poll(ctx, "gl")
	require.NoError(t, st.Err)
	require.Equal(t, 1, st.SetAside)
	require.Equal(t, 1, st.Events, "the other thread's assignment")
	after, err := ps.PollCursor(ctx, "gl")
	require.NoError(t, err)
	require.True(t, after.Since.After(before.Since), "the cursor moves past the failing thread")
}
