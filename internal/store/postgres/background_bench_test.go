package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/store/sqlstore/sqlstoretest"
)

// BenchmarkBackgroundQueries is sqlstoretest.BenchBackground on PostgreSQL: every statement
// Alfred issues on its own at 10 and 100,000 mailboxes, each size in its own schema.
func BenchmarkBackgroundQueries(b *testing.B) {
	stores := make([]*sqlstore.Store, len(sqlstoretest.BackgroundSizes))
	for i, n := range sqlstoretest.BackgroundSizes {
		stores[i] = seedBackground(b, n)
	}
	sqlstoretest.BenchBackground(b, stores)
}

// seedBackground creates a schema with n mailboxes as sqlstoretest.BenchBackground describes
// (the closed ones purged 30 days after closing), bulk-inserted with generate_series (one
// statement a table), vacuums and analyses the tables and returns its store.
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

// BenchmarkIngestRounds is sqlstoretest.BenchIngestRounds on PostgreSQL.
func BenchmarkIngestRounds(b *testing.B) {
	db, _ := pgtest.New(b)
	s := postgres.New(db, nil)
	batch := 0
	sqlstoretest.BenchIngestRounds(b, s, func(n int) {
		batch++
		_, err := db.ExecContext(b.Context(), `INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at)
			SELECT (SELECT id FROM mailboxes ORDER BY id LIMIT 1 OFFSET g % (SELECT count(*) FROM mailboxes)), 'forgejo',
				'seed-' || $2 || '-' || g, 'h', 'comment', '{}', now(), now()
			FROM generate_series(1, $1) AS g`, n, batch)
		require.NoError(b, err)
	})
}
