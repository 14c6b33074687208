package postgres_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
)

// BenchmarkLease measures claiming the next due mailbox (postgres.Store.Lease: the claim and the read of
// the claimed mailbox) with 10, 10,000 and 100,000 mailboxes, each size in its own schema, two
// mailboxes due at every size (one with a pending event, one whose timer has come): 1% of the
// rest wait on a timer in the future, the others are closed, and every mailbox has three
// processed events (vacuumed and analysed before the first claim). Every iteration claims
// claimsPerIteration times at each size in turn, so all sizes see the same load of the machine;
// each claim is released (not timed), so the next one finds the same due mailboxes. Reported: the median claim time per size (ms-10, ms-10000, ms-100000) and
// ratio = ms-100000 / ms-10.
func BenchmarkLease(b *testing.B) {
	const claimsPerIteration = 25
	sizes := []int{10, 10_000, 100_000}
	stores := make([]*sqlstore.Store, len(sizes))
	took := make([][]time.Duration, len(sizes))
	for i, n := range sizes {
		stores[i] = seedMailboxes(b, n)
	}
	ctx := b.Context()
	for b.Loop() {
		for range claimsPerIteration {
			for i, store := range stores {
				start := time.Now()
				mb, err := store.Lease(ctx, "bench", time.Minute)
				took[i] = append(took[i], time.Since(start))
				require.NoError(b, err)
				require.NotNil(b, mb)
				require.LessOrEqual(b, mb.Number, int64(2), "only the due mailboxes are claimed")
				require.NoError(b, store.Release(ctx, mb.ID, "bench", 0))
			}
		}
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	for i, n := range sizes {
		b.ReportMetric(med(took[i]), fmt.Sprintf("ms-%d", n))
	}
	b.ReportMetric(med(took[2])/med(took[0]), "ratio")
}

// seedMailboxes creates a schema with n mailboxes as BenchmarkLease describes, bulk-inserted
// with generate_series, and returns its store.
func seedMailboxes(b *testing.B, n int) *sqlstore.Store {
	db, _ := pgtest.New(b)
	ctx := b.Context()
	seed := []string{
		`INSERT INTO mailboxes (forge, repo, number, state, closed_at, wake_at, updated_at)
		SELECT 'gitlab', 'bench/repo', g,
			CASE WHEN g <= 2 OR g % 100 = 0 OR $1 <= 10 THEN 'idle' ELSE 'done' END,
			CASE WHEN g <= 2 OR g % 100 = 0 OR $1 <= 10 THEN NULL ELSE now() - interval '1 day' END,
			CASE WHEN g = 2 THEN now() - interval '1 minute'
			     WHEN g > 2 AND (g % 100 = 0 OR $1 <= 10) THEN now() + interval '1 day' END,
			now() - make_interval(secs => g)
		FROM generate_series(1, $1) AS g`,
		`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, processed_at)
		SELECT m.id, 'gitlab', m.id || '-' || k, m.id || '-' || k, 'issue', '{}', now()
		FROM mailboxes m, generate_series(1, 3) AS k`,
		`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload)
		SELECT id, 'gitlab', 'pending', 'pending', 'issue', '{}' FROM mailboxes WHERE number = 1`,
		`VACUUM ANALYZE`,
	}
	for i, q := range seed {
		var err error
		if i == 0 {
			_, err = db.ExecContext(ctx, q, n)
		} else {
			_, err = db.ExecContext(ctx, q)
		}
		require.NoError(b, err)
	}
	return postgres.New(db, nil)
}
