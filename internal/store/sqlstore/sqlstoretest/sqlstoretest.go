// Package sqlstoretest is the conformance suite of the SQL store (internal/store/sqlstore) on a
// real engine: Run proves a store on PostgreSQL or on SQLite keeps every contract the rest of
// Alfred relies on. It runs the mailbox.Store suite (mailbox/storetest: deliver and dedup,
// leases and rescue, mailboxes, questions, runs, comments) and then what only the SQL store
// implements: the container log (executors table) and the recovery queries, the agent sessions and installations,
// the admin facts, and times kept to the microsecond. BenchBackground is the benchmark of the
// statements Alfred issues on its own, on data SeedBackground writes in bulk with the same
// statements on both engines.
package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// NewStore returns an empty, migrated store of the engine under test, reading time from now.
type NewStore func(t *testing.T, now func() time.Time) *sqlstore.Store

// Run runs the suite; every subtest gets its own store.
func Run(t *testing.T, newStore NewStore) {
	t.Run("MailboxStore", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, now func() time.Time) storetest.Store { return newStore(t, now) })
	})
	for name, test := range map[string]func(*testing.T, *sqlstore.Store, *storetest.Clock){
		"ExecutorLogAndRecoveryQueries": executorLog,
		"SessionsAndInstallations":      sessionsAndInstallations,
		"AdminSessionFacts":             adminSessionFacts,
		"TimesKeepTheirInstant":         timesKeepTheirInstant,
		"RetentionPurgesAndKeeps":       retention,
		"WebReader":                     webReader,
		"UnratedRunsAreNotFree":         unratedRuns,
		"WebReaderPages":                webReaderPages,
		"MailboxPageBounded":            mailboxPageBounded,
		"ShadowPageBounded":             shadowPageBounded,
		"ConcurrentDeliveries":          concurrentDeliveries,
		"SchemaVersionIsTheNewest":      schemaVersion,
		"SameDeliveryIDOtherBodyLogged": sameDeliveryOtherBody,
		"ClosedMailboxesStayOut":        closedStayOut,
		"SaveProcessedGroups":           saveProcessedGroups,
		"EventsRecordedOnArrival":       eventsRecordedOnArrival,
		"PausedMailboxNotClaimed":       pausedNotClaimed,
		"PausedProjectNotClaimed":       pausedProject,
		"RunCancelRequest":              cancelRequest,
		"ShadowWrites":                  shadowWrites,
		"PollCursors":                   pollCursors,
		"InstallationControls":          installationControls,
		"ReplicaRecordedOnChange":       replicaRecordedOnChange,
		"RerunTold":                     rerunTold,
		"OperatorSessions":              operatorSessions,
		"StateChangesOnTheTimeline":     stateTimeline,
		"RebuiltMailboxTimeline":        rebuiltTimeline,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := storetest.NewClock(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
			test(t, newStore(t, c.Now), c)
		})
	}
}

// mailboxWithRun delivers an event to issue n, starts a development run in its mailbox and
// returns both.
func mailboxWithRun(t *testing.T, s *sqlstore.Store, n int64) (*mailbox.Mailbox, *mailbox.Run) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Deliver(ctx, storetest.Event(n, "d", "h"))
	require.NoError(t, err)
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n})
	require.NoError(t, err)
	run := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, run))
	return mb, run
}

func executorLog(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	mb, run := mailboxWithRun(t, s, 1)

	rec := &runner.ContainerRecord{RunID: run.ID, MailboxID: mb.ID, ContainerName: "alfred-mbx1-r1-development-a1",
		Adapter: "script", WorkspacePath: "/data/worktrees/x", Branch: "agent/issue-1", SupportsSessionResume: true}
	require.NoError(t, s.InsertContainer(ctx, rec))
	require.NotZero(t, rec.ID)
	require.Equal(t, runner.ContainerStarting, rec.Status)
	require.Equal(t, "docker", rec.Runtime)
	require.True(t, rec.CreatedAt.Equal(c.Now()), "created at the store's clock")
	dup := *rec
	require.ErrorIs(t, s.InsertContainer(ctx, &dup), runner.ErrNameConflict, "one row per container name")

	c.Add(time.Second)
	require.NoError(t, s.ContainerStarted(ctx, rec.ID, "abc123"))
	c.Add(time.Second)
	require.NoError(t, s.ContainerSeen(ctx, rec.ID))
	live, err := s.LiveContainers(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.Equal(t, runner.ContainerReady, live[0].Status)
	require.Equal(t, "abc123", live[0].ContainerID)
	require.Equal(t, "script", live[0].Adapter)
	require.True(t, live[0].SupportsSessionResume)
	require.True(t, live[0].LastSeenAt.Equal(c.Now()), "the heartbeat renews last_seen_at")

	ids, err := s.UnfinishedMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{mb.ID}, ids)
	withLive, err := s.LiveContainerMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int64]bool{mb.ID: true}, withLive)
	open, err := s.OpenMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int64]bool{mb.ID: true}, open)
	leased, err := s.LeasedMailboxes(ctx)
	require.NoError(t, err)
	require.Empty(t, leased)
	mb, err = s.Claim(ctx, mb.ID, "w1", time.Minute) // saved below under this lease
	require.NoError(t, err)
	leased, err = s.LeasedMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int64]bool{mb.ID: true}, leased)
	c.Add(2 * time.Minute)
	leased, err = s.LeasedMailboxes(ctx)
	require.NoError(t, err)
	require.Empty(t, leased, "an expired lease is not live")

	require.Error(t, s.EndContainer(ctx, rec.ID, runner.ContainerReady, ""), "ready is not a final status")
	require.NoError(t, s.EndContainer(ctx, rec.ID, runner.ContainerStopped, "succeeded, exit 0"))
	live, err = s.LiveContainers(ctx)
	require.NoError(t, err)
	require.Empty(t, live)
	withLive, err = s.LiveContainerMailboxes(ctx)
	require.NoError(t, err)
	require.Empty(t, withLive)
	second := &runner.ContainerRecord{RunID: run.ID, MailboxID: mb.ID, ContainerName: "alfred-mbx1-r1-development-a2"}
	require.NoError(t, s.InsertContainer(ctx, second))
	require.NoError(t, s.EndContainer(ctx, second.ID, runner.ContainerError, "image missing"))
	all, err := s.RunContainers(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, runner.ContainerStopped, all[0].Status)
	require.Equal(t, "succeeded, exit 0", all[0].ErrorMessage)
	require.Equal(t, runner.ContainerError, all[1].Status)

	ids, err = s.UnfinishedMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{mb.ID}, ids, "the run is still running")
	mb.ClosedAt = new(c.Now())
	require.NoError(t, s.Save(ctx, mb))
	open, err = s.OpenMailboxes(ctx)
	require.NoError(t, err)
	require.Empty(t, open)
}

func sessionsAndInstallations(t *testing.T, s *sqlstore.Store, _ *storetest.Clock) {
	ctx := context.Background()
	mb, run := mailboxWithRun(t, s, 1)
	rec := &runner.ContainerRecord{RunID: run.ID, MailboxID: mb.ID, ContainerName: "alfred-mbx1-r1-a1", Adapter: "codex"}
	require.NoError(t, s.InsertContainer(ctx, rec))

	none, err := s.LatestSession(ctx, mb.ID)
	require.NoError(t, err)
	require.Nil(t, none)
	ok := &phase.SessionRecord{MailboxID: mb.ID, RunID: &run.ID, Adapter: "codex", Model: "m", Name: "agent/issue-1",
		NativeID: "n-1", TokensIn: 10, TokensOut: 20, CostUSD: 0.25, ReportedIn: 100, ReportedOut: 200,
		ReportedCost: 1.5, DurationMS: 1234, Succeeded: true, StateHost: "alfred-a-3f9c2a1b"}
	require.NoError(t, s.RecordSession(ctx, ok))
	require.NotZero(t, ok.ID)
	failed := &phase.SessionRecord{MailboxID: mb.ID, Adapter: "codex", Name: "agent/issue-1", NativeID: "n-2",
		Resumed: true, FallbackReason: "unknown id"}
	require.NoError(t, s.RecordSession(ctx, failed))

	latest, err := s.LatestSession(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, *ok, *latest, "the latest successful session with a native id, every column kept")
	all, err := s.Sessions(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, *failed, all[1])
	execs, err := s.RunContainers(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, "n-1", execs[0].NativeSessionID, "the run's container knows its session")

	in, err := s.Installation(ctx, "codex", "img:1")
	require.NoError(t, err)
	require.Nil(t, in)
	require.NoError(t, s.RecordInstallation(ctx, runner.Installation{Adapter: "codex", Image: "img:1", Version: "0.1"}))
	require.NoError(t, s.RecordInstallation(ctx, runner.Installation{Adapter: "codex", Image: "img:1", Version: "0.2", ResumeVerified: true}))
	in, err = s.Installation(ctx, "codex", "img:1")
	require.NoError(t, err)
	require.Equal(t, runner.Installation{Adapter: "codex", Image: "img:1", Version: "0.2", ResumeVerified: true}, *in,
		"a detected version replaces the last one")
}

func adminSessionFacts(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	mb, run := mailboxWithRun(t, s, 1)
	f, err := s.SessionFacts(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, mb.ID, f.Mailbox.ID)
	require.Nil(t, f.Session)
	require.Nil(t, f.Container)
	require.True(t, f.LastRunUnfinished, "the run is still running")

	require.NoError(t, s.InsertContainer(ctx, &runner.ContainerRecord{RunID: run.ID, MailboxID: mb.ID,
		ContainerName: "alfred-c1", WorkspacePath: "/w"}))
	require.NoError(t, s.RecordSession(ctx, &phase.SessionRecord{MailboxID: mb.ID, Adapter: "script",
		Name: "agent/issue-1", NativeID: "n"}))
	run.Status, run.Outcome = mailbox.RunSucceeded, "ok"
	require.NoError(t, s.FinishRun(ctx, run))
	f, err = s.SessionFacts(ctx, mb.ID)
	require.NoError(t, err)
	require.Equal(t, "n", f.Session.NativeID)
	require.False(t, f.Session.Succeeded)
	require.Equal(t, "alfred-c1", f.Container.Name)
	require.Equal(t, "starting", f.Container.Status)
	require.True(t, f.Container.LastSeen.Equal(c.Now()))
	require.False(t, f.LastRunUnfinished)

	_, err = s.SessionFacts(ctx, mb.ID+100)
	require.ErrorIs(t, err, mailbox.ErrNotFound)
}

// Times are written by one engine's driver and read back by it: a lease expiry, a timer and a
// deadline keep their instant to the microsecond, whatever the zone they were given in, and
// compare in SQL as instants.
func timesKeepTheirInstant(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	mb, _ := mailboxWithRun(t, s, 1)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	wake := time.Date(2026, 11, 29, 15, 30, 0, 123456789, zone) // 10:00:00.123456789 UTC
	mb.WakeAt = &wake
	require.NoError(t, s.Save(ctx, mb))
	got, err := s.Get(ctx, mb.ID)
	require.NoError(t, err)
	require.WithinDuration(t, wake, *got.WakeAt, time.Microsecond, "PostgreSQL rounds to the microsecond, SQLite truncates")
	require.True(t, got.CreatedAt.Equal(c.Now()))

	// At 10:00:00 UTC the timer (10:00:00.123 UTC, written as 15:30 in its zone) has not come;
	// at 10:00:00.124 it has.
	lease, err := s.Lease(ctx, "w", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, lease, "pending events make it due")
	for _, e := range mustPending(t, s, mb.ID) {
		require.NoError(t, s.MarkProcessed(ctx, e.ID, "done"))
	}
	require.NoError(t, s.Release(ctx, mb.ID, "w", 0))
	early := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	c.Add(early.Sub(c.Now()))
	lease, err = s.Lease(ctx, "w", time.Minute)
	require.NoError(t, err)
	require.Nil(t, lease, "the timer has not come")
	c.Add(124 * time.Millisecond)
	lease, err = s.Lease(ctx, "w", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, lease, "the timer has come")
}

func mustPending(t *testing.T, s *sqlstore.Store, id int64) []mailbox.StoredEvent {
	t.Helper()
	evs, err := s.PendingEvents(context.Background(), id)
	require.NoError(t, err)
	return evs
}
