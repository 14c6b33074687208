package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// Commit is one successful Store.SaveProcessed seen by a SaveRecorder: the mailbox, its
// event groups and the mailbox's title as saved with them.
type Commit struct {
	MailboxID int64
	Groups    [][]int64
	Title     string
}

// IDs returns the event ids of the commit's groups, in order.
func (c Commit) IDs() []int64 { return slices.Concat(c.Groups...) }

// SaveRecorder is a Store recording every successful SaveProcessed, in the order they
// committed.
type SaveRecorder struct {
	Store
	mu      sync.Mutex
	commits []Commit
}

// SaveProcessed implements mailbox.Mailboxes and records the commit.
func (r *SaveRecorder) SaveProcessed(ctx context.Context, mb *mailbox.Mailbox, done []mailbox.Processed) error {
	r.mu.Lock()
	defer r.mu.Unlock() // held across the call: commits are recorded in their order
	if err := r.Store.SaveProcessed(ctx, mb, done); err != nil {
		return err
	}
	c := Commit{MailboxID: mb.ID, Title: mb.Title}
	for _, g := range done {
		c.Groups = append(c.Groups, slices.Clone(g.IDs))
	}
	r.commits = append(r.commits, c)
	return nil
}

// Commits returns the recorded commits of mailbox id (every mailbox's for id 0).
func (r *SaveRecorder) Commits(id int64) []Commit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Commit
	for _, c := range r.commits {
		if id == 0 || c.MailboxID == id {
			out = append(out, c)
		}
	}
	return out
}

// eventsApplyOnceInOrder runs the event workers, as `alfred serve` does, over edits of issues
// that change nothing but the mailbox's title (which each carries): first a backlog stored before
// the workers start, then deliveries made while they run, from several senders at once. Every
// event must be committed exactly once, each mailbox's in the order they were stored, with the
// title of the last event of each commit saved in the same transaction, and a backlog must
// share commits.
func eventsApplyOnceInOrder(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	rec := &SaveRecorder{Store: s}
	fake := forgetest.NewFake(forge.KindGitLab)
	machine := mailbox.NewMachine(mailbox.Config{}, rec, map[string]mailbox.Bot{"gl": {Forge: fake, Login: "alfred"}},
		nil, nil, nil)
	workers := mailbox.NewWorkers(mailbox.WorkerConfig{Count: 3, Runs: 1, Poll: 10 * time.Millisecond}, rec, machine, nil)
	inbox := mailbox.WakingInbox{Inbox: rec, Workers: workers}
	const issues, perIssue = 4, 60
	// Issue n's i-th event (in the order stored: one sender per issue) carries the title
	// "issue n, comment i".
	deliver := func(n int64, i int) {
		ev := Event(n, fmt.Sprintf("d%d-%d", n, i), fmt.Sprintf("h%d-%d", n, i))
		ev.Title = fmt.Sprintf("issue %d, edit %d", n, i)
		_, err := inbox.Deliver(ctx, ev)
		require.NoError(t, err)
	}
	for i := range perIssue / 2 { // the backlog
		for n := int64(1); n <= issues; n++ {
			deliver(n, i)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { workers.Run(wctx) })
	var senders sync.WaitGroup
	for n := int64(1); n <= issues; n++ { // one sender per issue, all at once
		senders.Go(func() {
			for i := perIssue / 2; i < perIssue; i++ {
				deliver(n, i)
			}
		})
	}
	senders.Wait()
	mailboxes := make([]*mailbox.Mailbox, 0, issues)
	for n := int64(1); n <= issues; n++ {
		var mb *mailbox.Mailbox
		require.Eventually(t, func() bool {
			var err error
			mb, err = s.Find(ctx, issue(n))
			return err == nil
		}, 10*time.Second, time.Millisecond)
		mailboxes = append(mailboxes, mb)
	}
	require.Eventually(t, func() bool {
		for _, mb := range mailboxes {
			if evs, err := s.PendingEvents(ctx, mb.ID); err != nil || len(evs) > 0 {
				return false
			}
		}
		return true
	}, time.Minute, 5*time.Millisecond, "the workers process every event")
	stop()
	wg.Wait()

	shared := false
	for _, mb := range mailboxes {
		var ids []int64
		for _, c := range rec.Commits(mb.ID) {
			shared = shared || len(c.Groups) > 1
			ids = append(ids, c.IDs()...)
			// The events committed so far are comments 0 … len(ids)-1: the title saved with
			// them is the last one's.
			require.Equal(t, fmt.Sprintf("issue %d, edit %d", mb.Number, len(ids)-1), c.Title,
				"mailbox %d: saved with the effect of exactly the events it marks", mb.ID)
		}
		require.Len(t, ids, perIssue, "mailbox %d: every event committed once", mb.ID)
		require.True(t, slices.IsSorted(ids), "mailbox %d: in the order stored: %v", mb.ID, ids)
		require.Len(t, slices.Compact(slices.Clone(ids)), perIssue, "mailbox %d: no event twice", mb.ID)
		got, err := s.Get(ctx, mb.ID)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("issue %d, edit %d", mb.Number, perIssue-1), got.Title, "the last event's title is kept")
	}
	require.True(t, shared, "a backlog shares commits")
}
