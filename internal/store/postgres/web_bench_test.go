package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkWebMailboxes measures reading the operator's mailbox list (sqlstore.Store.Mailboxes)
// with 1,700 mailboxes, each with three events, two runs and a session record: the first page
// of 100 (101 rows read, as the page asks), the last page, and, as the baseline in the same
// run, the whole list in one read (what the list cost before it was paged). Reported per
// iteration: ms-first-page, ms-last-page, ms-whole-list and ratio = ms-whole-list /
// ms-first-page.
func BenchmarkWebMailboxes(b *testing.B) {
	const n, page = 1700, 100
	store := seedMailboxes(b, n)
	ctx := b.Context()
	for _, q := range []string{
		`INSERT INTO runs (mailbox_id, phase, attempt, status, finished_at)
		SELECT m.id, 'development', k, 'succeeded', now() FROM mailboxes m, generate_series(1, 2) AS k`,
		`INSERT INTO llm_sessions (mailbox_id, run_id, adapter, session_name, tokens_in, tokens_out, cost_usd)
		SELECT r.mailbox_id, r.id, 'claude', 'agent/x', 100, 10, 0.01 FROM runs r WHERE r.attempt = 1`,
		`ANALYZE`,
	} {
		_, err := store.DB().ExecContext(ctx, q)
		require.NoError(b, err)
	}
	var first, last, whole time.Duration
	for b.Loop() {
		for _, c := range []struct {
			offset, limit int
			into          *time.Duration
		}{{0, n, &whole}, {n - page, page + 1, &last}, {0, page + 1, &first}} {
			start := time.Now()
			list, err := store.Mailboxes(ctx, c.offset, c.limit)
			*c.into += time.Since(start)
			require.NoError(b, err)
			require.NotEmpty(b, list)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(first), "ms-first-page")
	b.ReportMetric(ms(last), "ms-last-page")
	b.ReportMetric(ms(whole), "ms-whole-list")
	b.ReportMetric(ms(whole)/ms(first), "ratio")
}
