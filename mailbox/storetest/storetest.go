// Package storetest is the conformance suite of mailbox.Store: Run proves a store keeps the
// contracts the mailbox package relies on. The in-memory store (mailbox/mailboxtest) runs it,
// and the SQL store on PostgreSQL and on SQLite runs it through internal/store/sqlstore/
// sqlstoretest; a new store plugs into the same suite.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Store is a mailbox.Store plus the reads tests inspect it with.
type Store interface {
	mailbox.Store
	mailbox.Rebuilds
	// Find reads the mailbox of an issue or merge request; an error wrapping
	// mailbox.ErrNotFound when there is none.
	Find(ctx context.Context, ref forge.IssueRef) (*mailbox.Mailbox, error)
	// Runs lists a mailbox's runs, oldest first.
	Runs(ctx context.Context, mailboxID int64) ([]mailbox.Run, error)
}

// Clock is a settable clock for the store under test.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

// Tick makes each Now move the clock on by d after reading it, as a real clock moves between
// two reads (0, the default, stops it): a test sees whether a store reads the time once or
// twice for what happens at one instant.
func (c *Clock) Tick(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.step = d }

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// NewStore returns an empty store of the kind under test, reading time from now.
type NewStore func(t *testing.T, now func() time.Time) Store

// Run runs the suite; every subtest gets its own store.
func Run(t *testing.T, newStore NewStore) {
	for name, test := range map[string]func(*testing.T, Store, *Clock){
		"DeliverDeduplicatesByDeliveryIdentity": deliverDeduplicates,
		"PipelineOfNoMailboxIsIgnored":          pipelineOfNoMailbox,
		"MergeRequestEventsFindTheIssue":        mergeRequestEventsFindTheIssue,
		"SaveProcessed":                         saveProcessed,
		"LeaseIsExclusiveExpiresAndBacksOff":    leaseIsExclusive,
		"QuestionsAreInsertedOnce":              questionsInsertedOnce,
		"RunsCountAttemptsAndRecover":           runsCountAttempts,
		"CommentsAreReplacedByKey":              commentsReplacedByKey,
		"CommentsApplyOnce":                     commentsApplyOnce,
		"ReconcileDueOldestFirst":               reconcileDueOldestFirst,
		"FailedEventsAreSetAside":               failedEventsSetAside,
		"LeaseAttemptsCountUntilReleased":       leaseAttemptsCount,
		"EventsApplyOnceInOrder":                eventsApplyOnceInOrder,
		"RebuildCreatesOnce":                    rebuildCreatesOnce,
		"EmptyUntilSomethingWasWorkedOn":        emptyUntilWorkedOn,
		"NotEmptyWithAMailboxPastIdle":          emptyUntilWorkedOnByState,
		"SavesAreFencedByTheLease":              savesAreFenced,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := NewClock(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
			test(t, newStore(t, c.Now), c)
		})
	}
}

// Event returns an edit of issue n of acme/shop (an event every mailbox applies in a pass,
// whatever its state: not mailbox.InertAtRest) with the given delivery id and body hash.
func Event(n int64, delivery, body string) forge.Event {
	return forge.Event{Forge: "gl", Kind: forge.KindGitLab, DeliveryID: delivery, BodyHash: body,
		Type: forge.EventIssueEdited, Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n},
		Sender: forge.User{Login: "alice"}, Title: "hi"}
}

// Comment returns a comment on issue n of acme/shop with the given delivery id and body hash:
// mailbox.InertAtRest.
func Comment(n int64, delivery, body string) forge.Event {
	return forge.Event{Forge: "gl", Kind: forge.KindGitLab, DeliveryID: delivery, BodyHash: body,
		Type: forge.EventComment, Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n},
		Sender: forge.User{Login: "alice"}, Comment: &forge.Comment{Body: "hi"}}
}

func issue(n int64) forge.IssueRef { return forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n} }

// deliverOn delivers a fresh event to issue n and returns its mailbox.
func deliverOn(t *testing.T, s Store, n int64) *mailbox.Mailbox {
	t.Helper()
	ctx := context.Background()
	_, err := s.Deliver(ctx, Event(n, fmt.Sprintf("d%d", n), fmt.Sprintf("h%d", n)))
	require.NoError(t, err)
	mb, err := s.Find(ctx, issue(n))
	require.NoError(t, err)
	return mb
}

// Settled delivers a fresh event to issue n of acme/shop and saves its mailbox as a pass leaves
// it: edited by edit (its state, timers, …), every pending event marked processed. It returns
// the mailbox.
func Settled(t testing.TB, s Store, n int64, edit func(*mailbox.Mailbox)) *mailbox.Mailbox {
	t.Helper()
	ctx := context.Background()
	_, err := s.Deliver(ctx, Event(n, fmt.Sprintf("d%d", n), fmt.Sprintf("h%d", n)))
	require.NoError(t, err)
	mb, err := s.Find(ctx, issue(n))
	require.NoError(t, err)
	evs, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	var ids []int64
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	edit(mb)
	require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: ids, Outcome: "done"}}))
	return mb
}

func deliverDeduplicates(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	// An event JSON cannot write (a time after year 9999) can never be stored: a bad payload
	// (answered 400), not a failure of the store (503, retried for ever).
	unwritable := Event(1, "d0", "h0")
	unwritable.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := s.Deliver(ctx, unwritable)
	require.ErrorIs(t, err, forge.ErrBadPayload)
	dup, err := s.Deliver(ctx, Event(1, "d1", "h1"))
	require.NoError(t, err)
	require.False(t, dup)
	dup, err = s.Deliver(ctx, Event(1, "d1", "h1"))
	require.NoError(t, err)
	require.True(t, dup, "same delivery id and body (a GitLab retry)")
	dup, err = s.Deliver(ctx, Event(1, "d2", "h1"))
	require.NoError(t, err)
	require.False(t, dup, "identical bodies under a new id are a new event (assign, unassign, assign)")
	dup, err = s.Deliver(ctx, Event(1, "d3", "h1"))
	require.NoError(t, err)
	require.False(t, dup)
	dup, err = s.Deliver(ctx, Event(1, "d1", "h2"))
	require.NoError(t, err)
	require.False(t, dup, "the same id with another body is kept")
	mb, err := s.Find(ctx, issue(1))
	require.NoError(t, err)
	require.Equal(t, mailbox.StateIdle, mb.State)
	evs, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	require.Equal(t, "hi", evs[0].Event.Title, "the event is decoded")
	_, err = s.Get(ctx, mb.ID+100)
	require.ErrorIs(t, err, mailbox.ErrNotFound)
}

// pipelineOfNoMailbox: a pipeline of no issue's mailbox is ignored and stores nothing: one on
// a branch (CI on main), and one of someone else's merge request (GitLab's merge request
// pipeline names its number), which creates no mailbox for that merge request, nor stores into
// the one it has (a review asked of Alfred).
func pipelineOfNoMailbox(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	ev := forge.Event{Forge: "gl", DeliveryID: "p1", BodyHash: "p1", Type: forge.EventPipeline,
		Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop"}, Pipeline: &forge.Pipeline{Ref: "main", SHA: "abc"}}
	_, err := s.Deliver(ctx, ev)
	var ignore *forge.IgnoreError
	require.ErrorAs(t, err, &ignore)

	mr := forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 12, MergeRequest: true}
	ev = forge.Event{Forge: "gl", DeliveryID: "p2", BodyHash: "p2", Type: forge.EventPipeline, Target: mr,
		Pipeline: &forge.Pipeline{Ref: "feature", SHA: "def", MergeRequest: 12}}
	_, err = s.Deliver(ctx, ev)
	require.ErrorAs(t, err, &ignore, "a pipeline of someone else's merge request")
	_, err = s.Find(ctx, mr)
	require.ErrorIs(t, err, mailbox.ErrNotFound, "no mailbox is made for it")

	_, err = s.Deliver(ctx, forge.Event{Forge: "gl", DeliveryID: "review", BodyHash: "review", Type: forge.EventReviewRequested,
		Target: mr, ReviewRequested: []string{"bot"}})
	require.NoError(t, err)
	ev.DeliveryID, ev.BodyHash = "p3", "p3"
	_, err = s.Deliver(ctx, ev)
	require.ErrorAs(t, err, &ignore, "a pipeline of a merge request Alfred reviews")
	mb, err := s.Find(ctx, mr)
	require.NoError(t, err)
	evs, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1, "only the review request")
}

func mergeRequestEventsFindTheIssue(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	mb := deliverOn(t, s, 1)
	mb.Branch, mb.MRNumber, mb.HeadSHA = "agent/issue-1", 7, "abc"
	require.NoError(t, s.Save(ctx, mb))
	mr := func(delivery string, number int64, branch, sha string) forge.Event {
		return forge.Event{Forge: "gl", DeliveryID: delivery, BodyHash: delivery, Type: forge.EventPipeline,
			Target:   forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: number, MergeRequest: number != 0},
			Pipeline: &forge.Pipeline{Ref: branch, SHA: sha}}
	}
	for _, ev := range []forge.Event{mr("by-number", 7, "", ""), mr("by-branch", 0, "agent/issue-1", ""), mr("by-sha", 0, "", "abc")} {
		_, err := s.Deliver(ctx, ev)
		require.NoError(t, err, ev.DeliveryID)
	}
	evs, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 4, "the three merge request events are the issue's")

	_, err = s.Deliver(ctx, forge.Event{Forge: "gl", DeliveryID: "other", BodyHash: "other", Type: forge.EventComment,
		Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 9, MergeRequest: true}})
	require.NoError(t, err)
	other, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 9, MergeRequest: true})
	require.NoError(t, err, "someone else's merge request has its own mailbox")
	require.NotEqual(t, mb.ID, other.ID)

	// A merge request of the issue's branch name with another number (a fork's) is someone
	// else's too; before the issue's merge request is saved, its branch finds the issue.
	fork := forge.Event{Forge: "gl", DeliveryID: "fork", BodyHash: "fork", Type: forge.EventMergeRequestClosed,
		Target:       forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 57, MergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: 57, SourceBranch: "agent/issue-1"}}
	_, err = s.Deliver(ctx, fork)
	require.NoError(t, err)
	forkMB, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 57, MergeRequest: true})
	require.NoError(t, err, "the fork's merge request has its own mailbox")
	require.NotEqual(t, mb.ID, forkMB.ID)
	mb2 := deliverOn(t, s, 2)
	mb2.Branch = "agent/issue-2"
	require.NoError(t, s.Save(ctx, mb2))
	opened := forge.Event{Forge: "gl", DeliveryID: "opened-2", BodyHash: "opened-2", Type: forge.EventMergeRequestOpened,
		Target:       forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 58, MergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: 58, SourceBranch: "agent/issue-2"}}
	_, err = s.Deliver(ctx, opened)
	require.NoError(t, err)
	evs, err = s.PendingEvents(ctx, mb2.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2, "the merge request opened before its number is saved is the issue's")

	// A fork's merge request (the payload says so) of the same branch name is another's even
	// then: its own mailbox.
	forked := forge.Event{Forge: "gl", DeliveryID: "forked-2", BodyHash: "forked-2", Type: forge.EventMergeRequestOpened,
		Target:       forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 59, MergeRequest: true},
		MergeRequest: &forge.MergeRequest{Number: 59, SourceBranch: "agent/issue-2", FromFork: true}}
	_, err = s.Deliver(ctx, forked)
	require.NoError(t, err)
	evs, err = s.PendingEvents(ctx, mb2.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2, "the fork's merge request is not the issue's")
	_, err = s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 59, MergeRequest: true})
	require.NoError(t, err, "the fork's merge request has its own mailbox")
}

// savesAreFenced: a save carries the lease owner the mailbox was read with and is refused
// (ErrLeaseLost) once the lease has changed hands since. Replica A's pass outlived its lease (a
// database outage longer than the TTL, a paused process) and replica B claimed the mailbox
// and applied its events; A's saves from its old read must not overwrite B's decision.
func savesAreFenced(t *testing.T, s Store, c *Clock) {
	ctx := context.Background()
	deliverOn(t, s, 1)
	a, err := s.Lease(ctx, "replica-a/1", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, a)
	evs, err := s.PendingEvents(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)

	// A's lease expired, nobody claimed the mailbox since: A's save still lands (nobody else
	// decided anything), and so does its data.
	c.Add(2 * time.Minute)
	a.Data.Round = 1
	require.NoError(t, s.Save(ctx, a))
	require.NoError(t, s.SaveData(ctx, a))

	b, err := s.Lease(ctx, "replica-b/1", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, b, "the expired lease is claimed again")
	b.State = mailbox.StateWaitingInfo
	require.NoError(t, s.SaveProcessed(ctx, b, []mailbox.Processed{{IDs: []int64{evs[0].ID}, Outcome: "b"}}))

	a.State, a.Data.Round = mailbox.StateCancelled, 9 // what A decided from its old read
	require.ErrorIs(t, s.SaveProcessed(ctx, a, []mailbox.Processed{{IDs: []int64{evs[0].ID}, Outcome: "a"}}), mailbox.ErrLeaseLost)
	require.ErrorIs(t, s.Save(ctx, a), mailbox.ErrLeaseLost)
	require.ErrorIs(t, s.SaveData(ctx, a), mailbox.ErrLeaseLost)
	run := &mailbox.Run{MailboxID: a.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, run))
	run.Status, run.Outcome, run.Applied = mailbox.RunSucceeded, "ok", false
	_, err = s.FinishRecoveredRun(ctx, run)
	require.NoError(t, err)
	require.ErrorIs(t, s.SaveApplied(ctx, a, run.ID), mailbox.ErrLeaseLost)
	require.NoError(t, s.DiscardUnapplied(ctx, a, "", ""), "a deposed holder's discard marks nothing")
	got, err := s.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateWaitingInfo, got.State, "B's decision stands")
	require.Equal(t, 1, got.Data.Round)
	un, err := s.UnappliedRun(ctx, a.ID, "development", "")
	require.NoError(t, err)
	require.NotNil(t, un, "the refused save marked no run applied")
	pending, err := s.PendingEvents(ctx, a.ID)
	require.NoError(t, err)
	require.Empty(t, pending)
	// A refused save marks none of the events it names: one still pending stays pending.
	_, err = s.Deliver(ctx, Event(1, "d-after", "h-after"))
	require.NoError(t, err)
	pending, err = s.PendingEvents(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.ErrorIs(t, s.SaveProcessed(ctx, a, []mailbox.Processed{{IDs: []int64{pending[0].ID}, Outcome: "a"}}), mailbox.ErrLeaseLost)
	left, err := s.PendingEvents(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, left, 1, "A's refused save marked nothing")

	// B goes on with the mailbox as its lease returned it; once B released it, a save from a
	// read under B's lease is refused too, and a read of the free mailbox saves.
	require.NoError(t, s.Save(ctx, b))
	require.NoError(t, s.Release(ctx, b.ID, "replica-b/1", 0))
	require.ErrorIs(t, s.Save(ctx, b), mailbox.ErrLeaseLost)
	free, err := s.Get(ctx, b.ID)
	require.NoError(t, err)
	require.NoError(t, s.Save(ctx, free))
}

func saveProcessed(t *testing.T, s Store, c *Clock) {
	ctx := context.Background()
	mb := deliverOn(t, s, 1)
	_, err := s.Deliver(ctx, Event(1, "d-2", "h-2"))
	require.NoError(t, err)
	evs, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	c.Add(time.Minute)
	mb.State, mb.Data.Round = mailbox.StateWaitingInfo, 3
	mb.Data.Decisions = map[string]string{"q1": "Comma"}
	require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: []int64{evs[0].ID}, Outcome: "applied"}}))
	mb.Data.Decisions["q1"] = "changed after the save"
	got, err := s.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateWaitingInfo, got.State)
	require.Equal(t, "Comma", got.Data.Decisions["q1"], "the store keeps what was saved")
	require.True(t, got.UpdatedAt.Equal(c.Now()), "updated at the store's clock")
	left, err := s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, evs[1].ID, left[0].ID)
	require.NoError(t, s.MarkProcessed(ctx, evs[1].ID, "done"))
	left, err = s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Empty(t, left)
	// Groups of several outcomes are saved together too.
	for _, d := range []string{"d-3", "d-4", "d-5"} {
		_, err = s.Deliver(ctx, Event(1, d, "h"+d))
		require.NoError(t, err)
	}
	evs, err = s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	mb.Data.Round = 4
	require.NoError(t, s.SaveProcessed(ctx, mb, []mailbox.Processed{{IDs: []int64{evs[0].ID}, Outcome: "applied"},
		{IDs: []int64{evs[1].ID}, Outcome: "ignored"}, {IDs: []int64{evs[2].ID}, Outcome: "applied"}}))
	left, err = s.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Empty(t, left)
	got, err = s.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, 4, got.Data.Round)

	got.Data.FailedPasses = 2
	got.State = mailbox.StateBlocked
	require.NoError(t, s.SaveData(ctx, got))
	again, err := s.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, 2, again.Data.FailedPasses)
	require.Equal(t, mailbox.StateWaitingInfo, again.State, "SaveData writes the data only")
}

// LeaseConcurrently leases, with one goroutine per store (owners p1, p2, …), every due mailbox
// for a minute until none is left, failing t when one is leased twice; it returns the owner of
// each mailbox. Several stores on one database stand for several processes.
func LeaseConcurrently(t *testing.T, stores ...mailbox.Leases) map[int64]string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	held := map[int64]string{}
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("p%d", i+1)
			for {
				mb, err := s.Lease(ctx, owner, time.Minute)
				if err != nil || mb == nil {
					assert.NoError(t, err)
					return
				}
				mu.Lock()
				prev, dup := held[mb.ID]
				held[mb.ID] = owner
				mu.Unlock()
				assert.False(t, dup, "mailbox %d leased by %s and %s", mb.ID, prev, owner)
			}
		}()
	}
	wg.Wait()
	return held
}

// leaseIsExclusive proves the Leases contract on one mailbox, clause after clause in the order
// a lease lives (claim, exclusivity, extension, expiry, rescue, back-off): one story, so it is
// kept in one function.
func leaseIsExclusive(t *testing.T, s Store, c *Clock) {
	ctx := context.Background()
	for n := int64(1); n <= 20; n++ {
		deliverOn(t, s, n)
	}
	held := LeaseConcurrently(t, s, s, s, s)
	require.Len(t, held, 20)

	// Every lease is live: nothing is due. Extend works for the owner only.
	mb, err := s.Lease(ctx, "p5", time.Minute)
	require.NoError(t, err)
	require.Nil(t, mb)
	var id int64
	var owner string
	for id, owner = range held {
		break
	}
	require.NoError(t, s.Extend(ctx, id, owner, time.Minute))
	require.ErrorIs(t, s.Extend(ctx, id, "intruder", time.Minute), mailbox.ErrLeaseLost)
	got, err := s.Claim(ctx, id, "intruder", time.Minute)
	require.NoError(t, err)
	require.Nil(t, got, "a live lease is not claimed")

	// The holder stops renewing: once its lease expires the mailbox is leased again (rescued).
	require.NoError(t, s.Extend(ctx, id, owner, time.Second))
	c.Add(2 * time.Second)
	require.ErrorIs(t, s.Extend(ctx, id, owner, time.Minute), mailbox.ErrLeaseLost)
	n, err := s.ExpiredLeases(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	mb, err = s.Lease(ctx, "p6", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, mb)
	require.Equal(t, id, mb.ID)

	// A failed pass releases with a backoff: not due again before it passes. The start-up
	// recovery's Claim is not held by it: no process holds the mailbox.
	require.NoError(t, s.Release(ctx, id, "p6", time.Hour))
	mb, err = s.Lease(ctx, "p7", time.Minute)
	require.NoError(t, err)
	require.Nil(t, mb)
	claimed, err := s.Claim(ctx, id, "recovery", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, claimed, "a backoff holds no claim")
	require.NoError(t, s.Release(ctx, id, "recovery", time.Hour))
	c.Add(2 * time.Hour)
	c.Add(time.Minute) // every other lease expired too; the released one is the only one with no holder
	mb, err = s.Claim(ctx, id, "p8", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, mb, "after the backoff the mailbox can be claimed")
	require.NoError(t, s.Release(ctx, id, "p8", 0))

	// A mailbox with nothing pending and no timer is not due; a timer that has come makes it due.
	all, err := s.PendingEvents(ctx, id)
	require.NoError(t, err)
	for _, e := range all {
		require.NoError(t, s.MarkProcessed(ctx, e.ID, "done"))
	}
	for {
		other, err := s.Lease(ctx, "sweeper", time.Hour)
		require.NoError(t, err)
		if other == nil {
			break
		}
		require.NotEqual(t, id, other.ID, "nothing pending: not due")
	}
	mb, err = s.Get(ctx, id)
	require.NoError(t, err)
	wake := c.Now().Add(time.Minute)
	mb.WakeAt = &wake
	require.NoError(t, s.Save(ctx, mb))
	got, err = s.Lease(ctx, "p9", time.Minute)
	require.NoError(t, err)
	require.Nil(t, got, "the timer has not come")
	c.Add(2 * time.Minute)
	got, err = s.Lease(ctx, "p9", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Equal(t, id, got.ID)

	// A closed mailbox wakes only by an event, never by a timer (closing clears it; this one
	// kept it).
	closed := c.Now()
	got.ClosedAt = &closed
	require.NoError(t, s.Save(ctx, got))
	require.NoError(t, s.Release(ctx, id, "p9", 0))
	mb, err = s.Lease(ctx, "p10", time.Minute)
	require.NoError(t, err)
	require.Nil(t, mb, "a closed mailbox's timer does not make it due")
	_, err = s.Deliver(ctx, Event(got.Number, "after-close", "after-close"))
	require.NoError(t, err)
	mb, err = s.Lease(ctx, "p10", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, mb, "an event on a closed mailbox makes it due")
	require.Equal(t, id, mb.ID)
}

func questionsInsertedOnce(t *testing.T, s Store, c *Clock) {
	ctx := context.Background()
	mb := deliverOn(t, s, 1)
	first := c.Now().Add(time.Hour)
	q := func(qid string, deadline time.Time) mailbox.Question {
		return mailbox.Question{MailboxID: mb.ID, Round: 2, QID: qid, Title: "t " + qid, OptionsJSON: `[{"id":"a","label":"A"}]`,
			Default: "a", DeadlineAt: deadline}
	}
	require.NoError(t, s.InsertQuestions(ctx, []mailbox.Question{q("q1", first), q("q2", first)}))
	require.NoError(t, s.InsertQuestions(ctx, []mailbox.Question{q("q1", first.Add(time.Hour))}))
	qs, err := s.Questions(ctx, mb.ID, 2)
	require.NoError(t, err)
	require.Len(t, qs, 2)
	require.Equal(t, "q1", qs[0].QID)
	require.True(t, qs[0].DeadlineAt.Equal(first), "a retried round keeps its first deadline")
	require.Equal(t, "A", qs[0].Options()[0].Label)
	require.NoError(t, s.AnswerQuestion(ctx, qs[1].ID, "a", "default", c.Now()))
	qs, err = s.Questions(ctx, mb.ID, 2)
	require.NoError(t, err)
	require.Nil(t, qs[0].Answer)
	require.Equal(t, "default", *qs[1].AnsweredBy)
	none, err := s.Questions(ctx, mb.ID, 3)
	require.NoError(t, err)
	require.Empty(t, none)

	later := first.Add(25 * time.Hour)
	require.NoError(t, s.SetQuestionsDeadline(ctx, mb.ID, 2, later))
	qs, err = s.Questions(ctx, mb.ID, 2)
	require.NoError(t, err)
	for _, x := range qs {
		require.True(t, x.DeadlineAt.Equal(later), "the round's deadline moved: %s", x.DeadlineAt)
	}
}

func runsCountAttempts(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	mb := deliverOn(t, s, 1)
	r1 := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, r1))
	require.Equal(t, 1, r1.Attempt)
	code := 1
	r1.Status, r1.Outcome, r1.ExitCode = mailbox.RunFailed, "boom", &code
	require.NoError(t, s.FinishRun(ctx, r1))
	other := &mailbox.Run{MailboxID: mb.ID, Phase: "analysis", Step: "functional"}
	require.NoError(t, s.StartRun(ctx, other))
	require.Equal(t, 1, other.Attempt, "attempts count per phase and step")

	ids, err := s.UnfinishedMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{mb.ID}, ids)
	interrupted, err := s.InterruptRuns(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, interrupted, 1)
	require.Equal(t, other.ID, interrupted[0].ID)
	require.Equal(t, mailbox.RunInterrupted, interrupted[0].Status)
	ids, err = s.UnfinishedMailboxes(ctx)
	require.NoError(t, err)
	require.Empty(t, ids)

	r2 := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, r2))
	require.Equal(t, 2, r2.Attempt)

	// A run finished by recovery is unapplied until the machine acts on it.
	running, err := s.RunningRuns(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, running, 1)
	r := running[0]
	require.Equal(t, r2.ID, r.ID)
	un, err := s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.Nil(t, un, "a running run is not unapplied")
	r.Status, r.Outcome, r.Result, r.HeadSHA, r.Applied = mailbox.RunSucceeded, "ok", `{"summary":"x"}`, "abc", false
	changed, err := s.FinishRecoveredRun(ctx, &r)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = s.FinishRecoveredRun(ctx, &r)
	require.NoError(t, err)
	require.False(t, changed, "only a running run is finished")
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.NotNil(t, un)
	require.Equal(t, "abc", un.HeadSHA)
	mb.State = mailbox.StateInCI
	require.NoError(t, s.SaveApplied(ctx, mb, un.ID))
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.Nil(t, un)
	got, err := s.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, got.State, "saved with the mark")

	r3 := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, r3))
	r3.Status, r3.Outcome, r3.Applied = mailbox.RunFailed, "boom", false
	_, err = s.FinishRecoveredRun(ctx, r3)
	require.NoError(t, err)
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.NotNil(t, un)
	require.NoError(t, s.DiscardUnapplied(ctx, mb, "development", ""), "keeps the run the state calls for")
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.NotNil(t, un, "kept")
	require.NoError(t, s.DiscardUnapplied(ctx, mb, "analysis", "functional"))
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.Nil(t, un, "another phase's outcome is discarded")
	r4 := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, r4))
	r4.Status, r4.Outcome, r4.Applied = mailbox.RunFailed, "boom", false
	_, err = s.FinishRecoveredRun(ctx, r4)
	require.NoError(t, err)
	require.NoError(t, s.DiscardUnapplied(ctx, mb, "", ""))
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.Nil(t, un)
	runs, err := s.Runs(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, runs, 5)
	require.Equal(t, mailbox.RunFailed, runs[0].Status)
	require.NotNil(t, runs[0].FinishedAt)
}

func commentsReplacedByKey(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	mb := deliverOn(t, s, 1)
	got, err := s.PostedComment(ctx, mb.ID, "ack-1")
	require.NoError(t, err)
	require.Nil(t, got)
	require.NoError(t, s.RecordComment(ctx, mailbox.PostedComment{MailboxID: mb.ID, Key: "ack-1", Kind: "ack"}))
	require.NoError(t, s.RecordComment(ctx, mailbox.PostedComment{MailboxID: mb.ID, Key: "ack-1", Kind: "ack", CommentID: 5, BodyHash: "x"}))
	got, err = s.PostedComment(ctx, mb.ID, "ack-1")
	require.NoError(t, err)
	require.Equal(t, mailbox.PostedComment{MailboxID: mb.ID, Key: "ack-1", Kind: "ack", CommentID: 5, BodyHash: "x"}, *got)
}
