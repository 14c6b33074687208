package mailbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// setupRecorded is setup with the store's commits recorded.
func setupRecorded(t *testing.T) (*bundle, *storetest.SaveRecorder) {
	var rec *storetest.SaveRecorder
	b := setupWith(t, guard{store: func(now func() time.Time) storetest.Store {
		rec = &storetest.SaveRecorder{Store: mailboxtest.NewStore(now)}
		return rec
	}})
	return b, rec
}

// quietAroundRefusal delivers two comments that change nothing, an assignment by a user without
// write access (Alfred reads the permission and posts a refusal) and two more comments, and
// returns their event ids in order.
func quietAroundRefusal(t *testing.T, b *bundle) []int64 {
	b.deliver(comment("alice", "one"))
	b.deliver(comment("alice", "two"))
	b.deliver(assign("mallory"))
	b.deliver(comment("alice", "three"))
	b.deliver(comment("alice", "four"))
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	evs, err := b.store.PendingEvents(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 5)
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

func groupsOf(commits []storetest.Commit) [][][]int64 {
	var out [][][]int64
	for _, c := range commits {
		out = append(out, c.Groups)
	}
	return out
}

// Events that change nothing outside the mailbox share the commit of the next event that does
// something (here a refusal posted), and the rest share one at the end.
func TestQuietEventsShareACommit(t *testing.T) {
	t.Parallel()
	b, rec := setupRecorded(t)
	ids := quietAroundRefusal(t, b)
	mb := b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State)
	require.Contains(t, b.lastComment(), "only a project member with write access can assign me")
	require.Equal(t, [][][]int64{
		{{ids[0]}, {ids[1]}, {ids[2]}},
		{{ids[3]}, {ids[4]}},
	}, groupsOf(rec.Commits(mb.ID)))
}

// When an event fails behind events that changed nothing, those are applied again from the
// stored mailbox one commit each, and the failing event stays pending for the next pass:
// every event is committed once, in order.
func TestFailureBehindQuietEventsKeepsTheOrder(t *testing.T) {
	t.Parallel()
	b, rec := setupRecorded(t)
	ids := quietAroundRefusal(t, b)
	b.fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "Role" {
			return forge.ErrUnavailable
		}
		return nil
	})
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.ErrorIs(t, b.machine.Advance(context.Background(), mb), forge.ErrUnavailable)
	require.Equal(t, [][][]int64{{{ids[0]}}, {{ids[1]}}}, groupsOf(rec.Commits(mb.ID)),
		"the comments before the failure are committed, one by one")

	b.fake.SetErrorHook(nil)
	b.advance()
	require.Equal(t, [][][]int64{
		{{ids[0]}}, {{ids[1]}},
		{{ids[2]}},
		{{ids[3]}, {ids[4]}},
	}, groupsOf(rec.Commits(mb.ID)))
	require.Contains(t, b.lastComment(), "only a project member with write access can assign me")
	b.requireUniqueMarkers()
}

// failingShared fails the first SaveProcessed that carries more than one group, as a commit
// lost to the database would.
type failingShared struct {
	*storetest.SaveRecorder
	failed bool
}

func (f *failingShared) SaveProcessed(ctx context.Context, mb *mailbox.Mailbox, done []mailbox.Processed) error {
	if len(done) > 1 && !f.failed {
		f.failed = true
		return errors.New("commit lost")
	}
	return f.SaveRecorder.SaveProcessed(ctx, mb, done)
}

// A shared commit that fails is not retried as one: the mailbox is read again and its events
// are applied one commit each, in order, the refusal posted once.
func TestFailedSharedCommitAppliesOneByOne(t *testing.T) {
	t.Parallel()
	var rec *storetest.SaveRecorder
	b := setupWith(t, guard{store: func(now func() time.Time) storetest.Store {
		rec = &storetest.SaveRecorder{Store: mailboxtest.NewStore(now)}
		return &failingShared{SaveRecorder: rec}
	}})
	ids := quietAroundRefusal(t, b)
	mb := b.advance()
	require.Equal(t, [][][]int64{{{ids[0]}}, {{ids[1]}}, {{ids[2]}}, {{ids[3]}}, {{ids[4]}}}, groupsOf(rec.Commits(mb.ID)))
	b.requireUniqueMarkers()
	refusals := 0
	for _, c := range b.comments() {
		if strings.Contains(c, "only a project member with write access can assign me") {
			refusals++
		}
	}
	require.Equal(t, 1, refusals)
}
