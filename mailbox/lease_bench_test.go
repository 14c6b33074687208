package mailbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
)

// BenchmarkLease measures claiming the next due mailbox (Store.Lease: the claim and the read of
// the claimed mailbox) with 10, 10,000 and 100,000 mailboxes, two of them due at every size
// (one with a pending event, one whose timer has come): 1% of the rest wait on a timer in the
// future, the others are closed, and every mailbox has three processed events. Each claim is
// released (outside the time), so the next one finds the same due mailboxes. ms/op is per
// claim; compare the sizes.
func BenchmarkLease(b *testing.B) {
	for _, n := range []int{10, 10_000, 100_000} {
		b.Run(fmt.Sprintf("mailboxes=%d", n), func(b *testing.B) {
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
			_, err := db.ExecContext(ctx, `ANALYZE`)
			require.NoError(b, err)
			store := mailbox.NewStore(db)
			for b.Loop() {
				mb, err := store.Lease(ctx, "bench", time.Minute)
				require.NoError(b, err)
				require.NotNil(b, mb)
				b.StopTimer()
				require.LessOrEqual(b, mb.Number, int64(2), "only the due mailboxes are claimed")
				require.NoError(b, store.Release(ctx, mb.ID, "bench", 0))
				b.StartTimer()
			}
		})
	}
}
