package postgres_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/store/postgres"
	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// backgroundSizes are the mailbox counts BenchmarkBackgroundQueries compares: the same ten
// live mailboxes alone, and with 99,990 closed ones.
var backgroundSizes = []int{10, 100_000}

// BenchmarkBackgroundQueries measures every statement Alfred issues on its own — both
// workers' claims, the queued-runs list, the start-up recovery's queries, the retention sweep
// (its list and one purge), the orphan sweep's three lists, reconciliation's selects and the
// look-ups of a merge request's issue mailbox by number, branch and head commit — with 10 and
// with 100,000 mailboxes (seedBackground), each size in its own schema. Each sub-benchmark
// runs its statement callsPerIteration times at each size in turn, so both sizes see the same
// load of the machine; a claim is released (not timed), so the next call finds the same due
// mailboxes. Reported per statement: the median time per size (ms-10, ms-100000) and
// ratio = ms-100000 / ms-10.
func BenchmarkBackgroundQueries(b *testing.B) {
	const callsPerIteration = 25
	ctx := b.Context()
	stores := make([]*sqlstore.Store, len(backgroundSizes))
	for i, n := range backgroundSizes {
		stores[i] = seedBackground(b, n)
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
			id, err := s.FindIssueMailbox(ctx, "gitlab", live.Repo, 0, "", headSHA(5))
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
		b.ReportMetric(meds[i], fmt.Sprintf("ms-%d", backgroundSizes[i]))
	}
	b.ReportMetric(meds[len(meds)-1]/meds[0], "ratio")
}

// headSHA is the head commit seedBackground gives mailbox number n.
func headSHA(n int) string { return fmt.Sprintf("%040d", n) }

// seedBackground creates a schema with n mailboxes, bulk-inserted with generate_series, and
// returns its store. Numbers 1 to 10 are the same at every size, all in repository bench/r0:
// 1 idle with a pending event, 2 idle with a timer that has come (both due for the event
// workers), 3 in development with its run due, 4 in development under another worker's live
// lease with a running run in a ready container, 5 in CI (merge request 100005, branch
// agent/issue-5, a head commit), 6 and 7 waiting for answers, 8 idle, 9 closed two days ago and
// 10 closed 40 days ago, both still holding their texts. Numbers above 10 are closed 41 to 740
// days ago in five repositories (bench/r0 … bench/r4), each with its branch, head commit and
// merge request, and were purged by retention 30 days after closing: no events, their runs'
// outputs and questions' contexts blank. Every mailbox from 3 on has two finished runs, each
// with a stopped container and a session record, and a question; every mailbox not purged has
// three processed events. The tables are vacuumed and analysed before the first statement.
func seedBackground(b *testing.B, n int) *sqlstore.Store {
	db, _ := pgtest.New(b)
	ctx := b.Context()
	seed := []string{
		`INSERT INTO mailboxes (forge, repo, number, state, closed_at, wake_at, updated_at, created_at,
			branch, head_sha, mr_number, reconciled_at, purged_at, lease_owner, lease_expires_at)
		SELECT 'gitlab', 'bench/r' || CASE WHEN g BETWEEN 6 AND 9 THEN g - 5 WHEN g <= 10 THEN 0 ELSE g % 5 END, g,
			CASE WHEN g IN (3, 4) THEN 'in_development' WHEN g = 5 THEN 'in_ci'
			     WHEN g IN (6, 7) THEN 'waiting_info' WHEN g IN (1, 2, 8) THEN 'idle' ELSE 'done' END,
			CASE WHEN g = 9 THEN now() - interval '2 days' WHEN g = 10 THEN now() - interval '40 days'
			     WHEN g > 10 THEN now() - make_interval(days => 41 + g % 700) END,
			CASE WHEN g IN (2, 3, 4) THEN now() - interval '1 minute'
			     WHEN g IN (5, 6, 7) THEN now() + interval '1 day' END,
			CASE WHEN g = 9 THEN now() - interval '2 days' WHEN g = 10 THEN now() - interval '40 days'
			     WHEN g > 10 THEN now() - make_interval(days => 41 + g % 700)
			     ELSE now() - make_interval(secs => g) END,
			now() - make_interval(days => 50 + g % 700),
			CASE WHEN g >= 3 THEN 'agent/issue-' || g ELSE '' END,
			CASE WHEN g >= 3 THEN lpad(g::text, 40, '0') ELSE '' END,
			CASE WHEN g >= 5 THEN 100000 + g ELSE 0 END,
			now() - make_interval(secs => g),
			CASE WHEN g > 10 THEN now() - make_interval(days => 11 + g % 700) END,
			CASE WHEN g = 4 THEN 'other' END,
			CASE WHEN g = 4 THEN now() + interval '1 hour' END
		FROM generate_series(1, $1) AS g`,
		`INSERT INTO runs (mailbox_id, phase, attempt, status, started_at, finished_at, exit_code, outcome, output, result)
		SELECT m.id, 'development', k, CASE WHEN m.number = 4 AND k = 2 THEN 'running' ELSE 'succeeded' END,
			m.created_at, CASE WHEN m.number = 4 AND k = 2 THEN NULL ELSE m.created_at END, 0, 'ok',
			CASE WHEN m.purged_at IS NULL THEN 'the agent''s log' ELSE '' END,
			CASE WHEN m.purged_at IS NULL THEN '{"summary":"done"}' ELSE '' END
		FROM mailboxes m, generate_series(1, 2) AS k WHERE m.number >= 3`,
		`INSERT INTO executors (run_id, mailbox_id, container_name, status, adapter)
		SELECT r.id, r.mailbox_id, 'alfred-' || r.id, CASE WHEN r.status = 'running' THEN 'ready' ELSE 'stopped' END, 'script'
		FROM runs r`,
		`INSERT INTO llm_sessions (mailbox_id, run_id, adapter, session_name, native_id, succeeded, tokens_in, cost_usd)
		SELECT r.mailbox_id, r.id, 'script', 'agent/issue', 'n' || r.id, TRUE, 100, 0.01 FROM runs r`,
		`INSERT INTO questions (mailbox_id, round, qid, title, context, options, default_option, deadline_at)
		SELECT m.id, 1, 'q1', 'Which separator?', CASE WHEN m.purged_at IS NULL THEN 'quoted from the issue' ELSE '' END,
			'[]', 'a', m.created_at
		FROM mailboxes m WHERE m.number >= 3`,
		`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at)
		SELECT m.id, 'gitlab', m.id || '-' || k, m.id || '-' || k, 'issue', '{}', m.created_at, m.created_at
		FROM mailboxes m, generate_series(1, 3) AS k WHERE m.purged_at IS NULL`,
		`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload)
		SELECT id, 'gitlab', 'pending', 'pending', 'issue', '{}' FROM mailboxes WHERE number = 1`,
		`VACUUM ANALYZE mailboxes, events, runs, executors, llm_sessions, questions`,
	}
	for i, q := range seed {
		var err error
		if i == 0 {
			_, err = db.ExecContext(ctx, q, n)
		} else {
			_, err = db.ExecContext(ctx, q)
		}
		require.NoError(b, err, "seed statement %d", i)
	}
	return postgres.New(db, nil)
}
