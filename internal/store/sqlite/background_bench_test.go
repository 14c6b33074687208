package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/store/sqlstore/sqlstoretest"
)

// BenchmarkBackgroundQueries is sqlstoretest.BenchBackground on SQLite: every statement
// Alfred issues on its own at 10 and 100,000 mailboxes, each size in its own database file.
func BenchmarkBackgroundQueries(b *testing.B) {
	stores := make([]*sqlstore.Store, len(sqlstoretest.BackgroundSizes))
	for i, n := range sqlstoretest.BackgroundSizes {
		stores[i] = seedBackground(b, n)
	}
	sqlstoretest.BenchBackground(b, stores)
}

// seedBackground creates a database with n mailboxes as sqlstoretest.BenchBackground
// describes (the closed ones purged 30 days after closing), bulk-inserted with a recursive
// series (one statement a table), analyses it and returns its store. Times are Unix
// microseconds, as the store writes them: $2 is now, $3 a day.
func seedBackground(b *testing.B, n int) *sqlstore.Store {
	ctx := b.Context()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "alfred.db"), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	seed := []string{
		`WITH RECURSIVE series (g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM series WHERE g < $1)
		INSERT INTO mailboxes (forge, repo, number, state, closed_at, wake_at, updated_at, created_at,
			branch, head_sha, mr_number, reconciled_at, purged_at, lease_owner, lease_expires_at)
		SELECT 'gitlab', 'bench/r' || CASE WHEN g BETWEEN 6 AND 9 THEN g - 5 WHEN g <= 10 THEN 0 ELSE g % 5 END, g,
			CASE WHEN g IN (3, 4) THEN 'in_development' WHEN g = 5 THEN 'in_ci'
			     WHEN g IN (6, 7) THEN 'waiting_info' WHEN g IN (1, 2, 8) THEN 'idle' ELSE 'done' END,
			CASE WHEN g = 9 THEN $2 - 2 * $3 WHEN g = 10 THEN $2 - 40 * $3
			     WHEN g > 10 THEN $2 - (41 + g % 700) * $3 END,
			CASE WHEN g IN (2, 3, 4) THEN $2 - 60000000 WHEN g IN (5, 6, 7) THEN $2 + $3 END,
			CASE WHEN g = 9 THEN $2 - 2 * $3 WHEN g = 10 THEN $2 - 40 * $3
			     WHEN g > 10 THEN $2 - (41 + g % 700) * $3 ELSE $2 - g * 1000000 END,
			$2 - (50 + g % 700) * $3,
			CASE WHEN g >= 3 THEN 'agent/issue-' || g ELSE '' END,
			CASE WHEN g >= 3 THEN substr('0000000000000000000000000000000000000000' || g, -40, 40) ELSE '' END,
			CASE WHEN g >= 5 THEN 100000 + g ELSE 0 END,
			$2 - g * 1000000,
			CASE WHEN g > 10 THEN $2 - (11 + g % 700) * $3 END,
			CASE WHEN g = 4 THEN 'other' END,
			CASE WHEN g = 4 THEN $2 + 3600000000 END
		FROM series`,
		`INSERT INTO runs (mailbox_id, phase, attempt, status, started_at, finished_at, exit_code, outcome, output, result)
		SELECT m.id, 'development', k.k, CASE WHEN m.number = 4 AND k.k = 2 THEN 'running' ELSE 'succeeded' END,
			m.created_at, CASE WHEN m.number = 4 AND k.k = 2 THEN NULL ELSE m.created_at END, 0, 'ok',
			CASE WHEN m.purged_at IS NULL THEN 'the agent''s log' ELSE '' END,
			CASE WHEN m.purged_at IS NULL THEN '{"summary":"done"}' ELSE '' END
		FROM mailboxes m, (SELECT 1 AS k UNION ALL SELECT 2) k WHERE m.number >= 3`,
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
		SELECT m.id, 'gitlab', m.id || '-' || k.k, m.id || '-' || k.k, 'issue', '{}', m.created_at, m.created_at
		FROM mailboxes m, (SELECT 1 AS k UNION ALL SELECT 2 UNION ALL SELECT 3) k WHERE m.purged_at IS NULL`,
		`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload)
		SELECT id, 'gitlab', 'pending', 'pending', 'issue', '{}' FROM mailboxes WHERE number = 1`,
		`ANALYZE`,
	}
	now := time.Now().UnixMicro()
	for i, q := range seed {
		var err error
		if i == 0 {
			_, err = s.DB().ExecContext(ctx, q, n, now, int64(24*time.Hour/time.Microsecond))
		} else {
			_, err = s.DB().ExecContext(ctx, q)
		}
		require.NoError(b, err, "seed statement %d", i)
	}
	return s
}

// BenchmarkIngestRounds is sqlstoretest.BenchIngestRounds on SQLite: the cost of a delivery
// (stored, read back as pending, marked processed) in a fresh database and after 20,000 and
// 40,000 processed events in the same mailboxes; ratio = third round / first.
func BenchmarkIngestRounds(b *testing.B) {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "alfred.db"), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	batch := 0
	sqlstoretest.BenchIngestRounds(b, s, func(n int) {
		batch++
		_, err := s.DB().ExecContext(b.Context(), `WITH RECURSIVE series (g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM series WHERE g < $1)
			INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at)
			SELECT (SELECT min(id) FROM mailboxes) + g % (SELECT count(*) FROM mailboxes), 'forgejo', -- ids 1 to 5 in a fresh file
				'seed-' || $2 || '-' || g, 'h', 'comment', '{}', $3, $3
			FROM series`, n, batch, time.Now().UnixMicro())
		require.NoError(b, err)
	})
}
