package mailbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// holdRuns makes every agent run wait until the returned release is called, and starts event
// and run workers (two of each) over b's store; they stop when the test ends.
func (b *bundle) holdRuns(tb testing.TB) (release func()) {
	tb.Helper()
	_, release = b.heldWorkers(tb, 2)
	return release
}

// heldWorkers starts n event and n run workers over b's store, every agent run waiting until
// release is called; they stop when the test ends.
func (b *bundle) heldWorkers(tb testing.TB, n int) (w *mailbox.Workers, release func()) {
	tb.Helper()
	return b.heldWorkersWith(tb, mailbox.WorkerConfig{Count: n, Runs: n})
}

// heldWorkersWith is heldWorkers with the workers of cfg (its owner "w", its poll 20 ms and its
// lease a minute).
func (b *bundle) heldWorkersWith(tb testing.TB, cfg mailbox.WorkerConfig) (w *mailbox.Workers, release func()) {
	tb.Helper()
	hold := make(chan struct{})
	b.exec.mu.Lock()
	b.exec.block = hold
	b.exec.mu.Unlock()
	cfg.Owner, cfg.Poll, cfg.LeaseTTL = "w", 20*time.Millisecond, time.Minute
	w = mailbox.NewWorkers(cfg, b.store, b.machine, b.log)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	tb.Cleanup(func() { release(); cancel(); wg.Wait() })
	return w, release
}

// assignNew creates an issue assigned to the bot and delivers the assignment.
func (b *bundle) assignNew(tb testing.TB, title string) forge.IssueRef {
	tb.Helper()
	n := b.fake.AddIssue(repo, forgetest.SeedIssue{Title: title, Author: "alice", Labels: []string{"type::task"}})
	ref := forge.IssueRef{Forge: "gl", Repo: repo, Number: n}
	b.fake.SetIssueAssignees(ref, "alice", forgetest.BotLogin)
	_, err := b.store.Deliver(context.Background(), forge.Event{Forge: "gl", Kind: forge.KindGitLab, Type: forge.EventAssignees,
		DeliveryID: fmt.Sprintf("assign-%s-%d", repo, n), BodyHash: fmt.Sprintf("h-%d", n), Target: ref,
		Sender: forge.User{Login: "alice"}, AssigneesKnown: true, Assignees: []string{forgetest.BotLogin}})
	require.NoError(tb, err)
	return ref
}

func (b *bundle) commentsOf(ref forge.IssueRef) string {
	var out []string
	for _, c := range b.fake.IssueComments(ref) {
		out = append(out, c.Body)
	}
	return strings.Join(out, "\n---\n")
}

func (b *bundle) runsStarted() int {
	b.exec.mu.Lock()
	defer b.exec.mu.Unlock()
	return len(b.exec.jobs)
}

// signal waits for cond; the bound is for a stuck test, not a measure of speed.
func signal(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	require.Eventually(tb, cond, 2*time.Minute, 5*time.Millisecond, "no %s", what)
}

func TestThirdIssueReactsWhileTwoRunsHoldTheLimit(t *testing.T) {
	t.Parallel()
	b := setupPG(t)
	release := b.holdRuns(t)
	first, second := b.assignNew(t, "First long run"), b.assignNew(t, "Second long run")
	signal(t, "two runs started", func() bool { return b.runsStarted() == 2 })

	third := b.assignNew(t, "Third issue")
	signal(t, "acknowledgement of the third issue", func() bool {
		return strings.Contains(b.commentsOf(third), "Thanks @alice, I am on it")
	})
	signal(t, "queued notice", func() bool { return strings.Contains(b.commentsOf(third), "Queued, ") })
	require.Equal(t, 2, b.runsStarted(), "the two runs still hold the limit")
	require.Contains(t, b.commentsOf(third), "all 2 agent run slots are busy")

	release()
	signal(t, "the third issue's run", func() bool { return b.runsStarted() >= 3 })
	for _, ref := range []forge.IssueRef{first, second, third} {
		signal(t, fmt.Sprintf("questions on %s", ref), func() bool { return strings.Contains(b.commentsOf(ref), "Which separator?") })
	}
}

// BenchmarkReactionWhileRunsHoldTheLimit measures the time from a delivered assignment to its
// acknowledgement on the forge while both run slots are held by runs that do not end.
func BenchmarkReactionWhileRunsHoldTheLimit(bm *testing.B) {
	b := setupPG(bm)
	b.holdRuns(bm)
	b.assignNew(bm, "First long run")
	b.assignNew(bm, "Second long run")
	signal(bm, "two runs started", func() bool { return b.runsStarted() == 2 })
	bm.ResetTimer()
	for i := range bm.N {
		ref := b.assignNew(bm, fmt.Sprintf("Reaction %d", i))
		signal(bm, "acknowledgement", func() bool {
			return strings.Contains(b.commentsOf(ref), "Thanks @alice, I am on it")
		})
	}
}

// claimCounter counts the run workers' claims and the passes' releases of the store it wraps.
type claimCounter struct {
	storetest.Store
	runClaims, releases atomic.Int64
}

func (c *claimCounter) LeaseRun(ctx context.Context, owner string, ttl time.Duration, runStates []string, perProject int) (*mailbox.Mailbox, error) {
	c.runClaims.Add(1)
	return c.Store.LeaseRun(ctx, owner, ttl, runStates, perProject)
}

func (c *claimCounter) Release(ctx context.Context, id int64, owner string, backoff time.Duration) error {
	c.releases.Add(1)
	return c.Store.Release(ctx, id, owner, backoff)
}

// An event pass wakes a run worker only when a run concerns its mailbox: comments on an issue
// Alfred is not assigned to cost the run workers nothing (an issue's first comment makes a pass,
// the mailbox's first event; the others are recorded on arrival and make none), and the
// assignment's pass,
// which leaves the analysis due, still starts it at once (the workers poll only once an hour
// here).
func TestEventPassWakesARunWorkerOnlyForARun(t *testing.T) {
	t.Parallel()
	b := setupPG(t, "type::task")
	c := &claimCounter{Store: b.store}
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w", Count: 1, Runs: 1, Poll: time.Hour, LeaseTTL: time.Minute},
		c, b.machine, b.log)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	signal(t, "the run worker's first claim", func() bool { return c.runClaims.Load() == 1 })

	inbox := mailbox.WakingInbox{Inbox: b.store, Workers: w}
	// The first comment on each of five issues: a pass each.
	for i := range 5 {
		ev := comment("alice", "Any news?")
		ev.Target = forge.IssueRef{Forge: "gl", Repo: repo, Number: b.ref.Number + 1 + int64(i)}
		_, err := inbox.Deliver(context.Background(), b.delivery(ev))
		require.NoError(t, err)
		signal(t, fmt.Sprintf("pass %d released", i+1), func() bool { return c.releases.Load() == int64(i+1) })
	}
	// Then the issue's own: its first makes a pass, the next are recorded on arrival.
	_, err := inbox.Deliver(context.Background(), b.delivery(comment("alice", "Any news?")))
	require.NoError(t, err)
	signal(t, "the issue's first comment's pass released", func() bool { return c.releases.Load() == 6 })
	for i := range 4 {
		dup, pending, err := b.store.(mailbox.ArrivalInbox).Arrive(context.Background(), b.delivery(comment("alice", fmt.Sprintf("Any news? (%d)", i))))
		require.NoError(t, err)
		require.False(t, dup)
		require.False(t, pending, "comment %d is recorded on arrival", i)
	}
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	evs, err := b.store.PendingEvents(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Empty(t, evs)
	require.Equal(t, int64(1), c.runClaims.Load(), "passes over comments woke a run worker")
	require.Zero(t, b.runsStarted())

	_, err = inbox.Deliver(context.Background(), b.delivery(assign("alice")))
	require.NoError(t, err)
	signal(t, "the analysis run", func() bool { return b.runsStarted() == 1 })
}
