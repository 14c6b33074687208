package sqlstoretest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// BackgroundSizes are the mailbox counts BenchBackground compares: the same ten live
// mailboxes alone, and with 99,990 closed ones.
var BackgroundSizes = []int{10, 100_000}

// BenchBackground measures every statement Alfred issues on its own — both workers' claims,
// the queued-runs list, the start-up recovery's queries, the retention sweep (its list and one
// purge), the orphan sweep's three lists, reconciliation's selects and the look-ups of a merge
// request's issue mailbox by number, branch and head commit — on one store a size, each
// opened empty by open and holding BackgroundSizes[i] mailboxes, seeded in bulk by
// SeedBackground as follows.
//
// Numbers 1 to 10 are the same at every size, in repository bench/r0 of forge gitlab but for 6
// to 9 (bench/r1 … bench/r4): 1 idle with a pending event, 2 idle with a timer that has come
// (both due for the event workers), 3 in development with its run due, 4 in development under
// another worker's live lease with a running run in a ready container, 5 in CI (merge request
// 100005, branch agent/issue-5, head commit BackgroundHeadSHA(5)), 6 and 7 waiting for
// answers, 8 idle, 9 closed two days ago and 10 closed 40 days ago, both still holding their
// texts. Numbers above 10 are closed 41 to 740 days ago in the five repositories, each with its
// branch, head commit and merge request, and were purged by retention: no events, their runs'
// outputs and questions' contexts blank. Every mailbox from 3 on has two finished runs, each
// with a stopped container and a session record, and a question; every mailbox not purged has
// three processed events.
//
// Each sub-benchmark runs its statement callsPerIteration times at each size in turn, so all
// sizes see the same load of the machine; a claim is released (not timed), so the next call
// finds the same due mailboxes. Reported per statement: the median time per size (ms-10,
// ms-100000) and ratio = ms-100000 / ms-10.
func BenchBackground(b *testing.B, open func(b *testing.B) *sqlstore.Store) {
	const callsPerIteration = 25
	ctx := b.Context()
	stores := make([]*sqlstore.Store, len(BackgroundSizes))
	for i, n := range BackgroundSizes {
		stores[i] = open(b)
		SeedBackground(b, stores[i], n)
	}
	ids := make([]map[int64]int64, len(stores)) // mailbox id by number, per size
	for i, s := range stores {
		ids[i] = map[int64]int64{}
		rows, err := s.DB().QueryxContext(ctx, `SELECT number, id FROM mailboxes WHERE number <= 10`)
		require.NoError(b, err)
		for rows.Next() {
			var number, id int64
			require.NoError(b, rows.Scan(&number, &id))
			ids[i][number] = id
		}
		require.NoError(b, rows.Close())
	}
	runStates := mailbox.RunStates()
	live := forge.IssueRef{Forge: "gitlab", Repo: "bench/r0", Number: 5}
	// Each statement is a call on the store of one size (i) that checks what it got.
	statements := []struct {
		name string
		call func(b *testing.B, i int, s *sqlstore.Store) func()
	}{
		{"event-claim", func(b *testing.B, i int, s *sqlstore.Store) func() {
			mb, err := s.LeaseEvents(ctx, "bench", time.Minute, runStates)
			require.NoError(b, err)
			require.NotNil(b, mb)
			require.LessOrEqual(b, mb.Number, int64(2), "only the due mailboxes are claimed")
			return func() { require.NoError(b, s.Release(ctx, mb.ID, "bench", 0)) }
		}},
		{"run-claim", func(b *testing.B, i int, s *sqlstore.Store) func() {
			mb, err := s.LeaseRun(ctx, "bench", time.Minute, runStates, 2)
			require.NoError(b, err)
			require.NotNil(b, mb)
			require.Equal(b, int64(3), mb.Number, "the one due run")
			return func() { require.NoError(b, s.Release(ctx, mb.ID, "bench", 0)) }
		}},
		{"queued-runs", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.QueuedRuns(ctx, runStates)
			require.NoError(b, err)
			require.Equal(b, []int64{ids[i][3]}, got)
			return nil
		}},
		{"expired-leases", func(b *testing.B, i int, s *sqlstore.Store) func() {
			n, err := s.ExpiredLeases(ctx)
			require.NoError(b, err)
			require.Zero(b, n)
			return nil
		}},
		{"unfinished-mailboxes", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.UnfinishedMailboxes(ctx)
			require.NoError(b, err)
			require.Equal(b, []int64{ids[i][4]}, got)
			return nil
		}},
		{"retention-list", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.Purgeable(ctx, time.Now().Add(-30*24*time.Hour))
			require.NoError(b, err)
			require.Len(b, got, 1)
			require.Equal(b, ids[i][10], got[0].ID, "the one closed mailbox past its retention and not purged")
			return nil
		}},
		{"retention-purge", func(b *testing.B, i int, s *sqlstore.Store) func() {
			require.NoError(b, s.Purge(ctx, ids[i][9]))
			return nil
		}},
		{"orphans-leased", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.LeasedMailboxes(ctx)
			require.NoError(b, err)
			require.Equal(b, map[int64]bool{ids[i][4]: true}, got)
			return nil
		}},
		{"orphans-open", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.OpenMailboxes(ctx)
			require.NoError(b, err)
			require.Len(b, got, 8)
			return nil
		}},
		{"orphans-live-containers", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.LiveContainerMailboxes(ctx)
			require.NoError(b, err)
			require.Equal(b, map[int64]bool{ids[i][4]: true}, got)
			return nil
		}},
		{"reconcile-due", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.ReconcileDue(ctx, "gitlab", 50)
			require.NoError(b, err)
			require.Len(b, got, 5, "the working mailboxes")
			return nil
		}},
		{"reconcile-known-repos", func(b *testing.B, i int, s *sqlstore.Store) func() {
			got, err := s.KnownRepos(ctx, "gitlab")
			require.NoError(b, err)
			require.Equal(b, []string{"bench/r0", "bench/r1", "bench/r2", "bench/r3", "bench/r4"}, got)
			return nil
		}},
		{"reconcile-tracked", func(b *testing.B, i int, s *sqlstore.Store) func() {
			ok, err := s.Tracked(ctx, live)
			require.NoError(b, err)
			require.True(b, ok)
			return nil
		}},
		{"lookup-by-mr", func(b *testing.B, i int, s *sqlstore.Store) func() {
			id, err := s.FindIssueMailbox(ctx, "gitlab", live.Repo, 100_005, "", "")
			require.NoError(b, err)
			require.Equal(b, ids[i][5], id)
			return nil
		}},
		{"lookup-by-branch", func(b *testing.B, i int, s *sqlstore.Store) func() {
			id, err := s.FindIssueMailbox(ctx, "gitlab", live.Repo, 0, "agent/issue-5", "")
			require.NoError(b, err)
			require.Equal(b, ids[i][5], id)
			return nil
		}},
		{"lookup-by-commit", func(b *testing.B, i int, s *sqlstore.Store) func() {
			id, err := s.FindIssueMailbox(ctx, "gitlab", live.Repo, 0, "", BackgroundHeadSHA(5))
			require.NoError(b, err)
			require.Equal(b, ids[i][5], id)
			return nil
		}},
	}
	for _, st := range statements {
		b.Run(st.name, func(b *testing.B) {
			took := make([][]time.Duration, len(stores))
			for b.Loop() {
				for range callsPerIteration {
					for i, s := range stores {
						start := time.Now()
						undo := st.call(b, i, s)
						took[i] = append(took[i], time.Since(start))
						if undo != nil {
							undo()
						}
					}
				}
			}
			reportSizes(b, took)
		})
	}
}

// reportSizes reports the median of each size's times (ms-<size>) and the ratio of the
// largest size's to the smallest's.
func reportSizes(b *testing.B, took [][]time.Duration) {
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e6
	}
	meds := make([]float64, len(took))
	for i, ds := range took {
		meds[i] = med(ds)
		b.ReportMetric(meds[i], fmt.Sprintf("ms-%d", BackgroundSizes[i]))
	}
	b.ReportMetric(meds[len(meds)-1]/meds[0], "ratio")
}

// BackgroundHeadSHA is the head commit of mailbox number n in BenchBackground's data: n
// padded with zeros to 40 digits.
func BackgroundHeadSHA(n int) string { return fmt.Sprintf("%040d", n) }
