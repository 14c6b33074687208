package sqlstoretest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
)

// The seed statements below run on both engines: a recursive series of bigints instead of
// generate_series, sub-selects of constants instead of small series, substr instead of lpad,
// and every time written through seedDialect.at. What the engines still do differently is in
// seedDialect, the one place the benchmarks' seeds name an engine.

// microsPerDay is a day in microseconds, the unit seedDialect.at offsets by.
const microsPerDay = "86400000000"

// seedDialect is how an engine writes what the bulk seeds cannot write portably.
type seedDialect struct {
	// now is the argument every seeded time is an offset from (bound as $2).
	now any
	// at returns the SQL of the time now ($2) plus offset, an SQL expression of microseconds.
	at func(offset string) string
	// analyze refreshes the planner's statistics of the seeded tables.
	analyze string
}

// seedDialectOf returns the seed dialect of s's engine. Times are timestamptz on PostgreSQL
// and Unix microseconds on SQLite (as the store writes them); PostgreSQL also vacuums, so the
// index-only scans see every page all-visible, as on a long-running database.
func seedDialectOf(tb testing.TB, s *sqlstore.Store) seedDialect {
	now := time.Now()
	switch name := s.Dialect().Name; name {
	case migrations.Postgres:
		return seedDialect{
			now:     now,
			at:      func(off string) string { return "(CAST($2 AS timestamptz) + (" + off + ") * interval '1 microsecond')" },
			analyze: `VACUUM ANALYZE mailboxes, events, runs, executors, llm_sessions, questions`,
		}
	case migrations.SQLite:
		return seedDialect{
			now:     now.UnixMicro(),
			at:      func(off string) string { return "($2 + (" + off + "))" },
			analyze: `ANALYZE`,
		}
	default:
		tb.Fatalf("no seed dialect for engine %q", name)
		return seedDialect{}
	}
}

// seedSeries is a recursive series g of bigints from 1 to $1, for a statement to insert from.
const seedSeries = `WITH RECURSIVE series (g) AS (SELECT CAST(1 AS BIGINT) UNION ALL SELECT g + 1 FROM series WHERE g < $1)
`

// seedStatement is one statement of a bulk seed; args are bound to its $n.
type seedStatement struct {
	query string
	args  []any
}

// seedExec runs the statements in order on s.
func seedExec(tb testing.TB, s *sqlstore.Store, statements []seedStatement) {
	for i, st := range statements {
		_, err := s.DB().ExecContext(tb.Context(), st.query, st.args...)
		require.NoError(tb, err, "seed statement %d", i)
	}
}

// SeedBackground fills an empty, migrated store with n mailboxes as BenchBackground describes
// (numbers above 10 purged 30 days after closing), in bulk: one statement a table, then the
// planner's statistics. The same statements run on PostgreSQL and on SQLite (seedDialect).
func SeedBackground(tb testing.TB, s *sqlstore.Store, n int) {
	d := seedDialectOf(tb, s)
	day := func(days string) string { return d.at("-(" + days + ") * " + microsPerDay) }
	closed := `CASE WHEN g = 9 THEN ` + day("2") + ` WHEN g = 10 THEN ` + day("40") +
		` WHEN g > 10 THEN ` + day("41 + g % 700")
	seedExec(tb, s, []seedStatement{
		{seedSeries + `INSERT INTO mailboxes (forge, repo, number, state, closed_at, wake_at, updated_at, created_at,
			branch, head_sha, mr_number, reconciled_at, purged_at, lease_owner, lease_expires_at)
		SELECT 'gitlab', 'bench/r' || CASE WHEN g BETWEEN 6 AND 9 THEN g - 5 WHEN g <= 10 THEN 0 ELSE g % 5 END, g,
			CASE WHEN g IN (3, 4) THEN 'in_development' WHEN g = 5 THEN 'in_ci'
			     WHEN g IN (6, 7) THEN 'waiting_info' WHEN g IN (1, 2, 8) THEN 'idle' ELSE 'done' END,
			` + closed + ` END,
			CASE WHEN g IN (2, 3, 4) THEN ` + d.at("-60000000") + ` WHEN g IN (5, 6, 7) THEN ` + day("-1") + ` END,
			` + closed + ` ELSE ` + d.at("-g * 1000000") + ` END,
			` + day("50 + g % 700") + `,
			CASE WHEN g >= 3 THEN 'agent/issue-' || g ELSE '' END,
			CASE WHEN g >= 3 THEN substr('0000000000000000000000000000000000000000' || g, length(CAST(g AS TEXT)) + 1) ELSE '' END,
			CASE WHEN g >= 5 THEN 100000 + g ELSE 0 END,
			` + d.at("-g * 1000000") + `,
			CASE WHEN g > 10 THEN ` + day("11 + g % 700") + ` END,
			CASE WHEN g = 4 THEN 'other' END,
			CASE WHEN g = 4 THEN ` + d.at("3600000000") + ` END
		FROM series`, []any{n, d.now}},
		{`INSERT INTO runs (mailbox_id, phase, attempt, status, started_at, finished_at, exit_code, outcome, output, result)
		SELECT m.id, 'development', k.k, CASE WHEN m.number = 4 AND k.k = 2 THEN 'running' ELSE 'succeeded' END,
			m.created_at, CASE WHEN m.number = 4 AND k.k = 2 THEN NULL ELSE m.created_at END, 0, 'ok',
			CASE WHEN m.purged_at IS NULL THEN 'the agent''s log' ELSE '' END,
			CASE WHEN m.purged_at IS NULL THEN '{"summary":"done"}' ELSE '' END
		FROM mailboxes m, (SELECT 1 AS k UNION ALL SELECT 2) k WHERE m.number >= 3`, nil},
		{`INSERT INTO executors (run_id, mailbox_id, container_name, status, adapter)
		SELECT r.id, r.mailbox_id, 'alfred-' || r.id, CASE WHEN r.status = 'running' THEN 'ready' ELSE 'stopped' END, 'script'
		FROM runs r`, nil},
		{`INSERT INTO llm_sessions (mailbox_id, run_id, adapter, session_name, native_id, succeeded, tokens_in, cost_usd)
		SELECT r.mailbox_id, r.id, 'script', 'agent/issue', 'n' || r.id, TRUE, 100, 0.01 FROM runs r`, nil},
		{`INSERT INTO questions (mailbox_id, round, qid, title, context, options, default_option, deadline_at)
		SELECT m.id, 1, 'q1', 'Which separator?', CASE WHEN m.purged_at IS NULL THEN 'quoted from the issue' ELSE '' END,
			'[]', 'a', m.created_at
		FROM mailboxes m WHERE m.number >= 3`, nil},
		{`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at)
		SELECT m.id, 'gitlab', m.id || '-' || k.k, m.id || '-' || k.k, 'issue', '{}', m.created_at, m.created_at
		FROM mailboxes m, (SELECT 1 AS k UNION ALL SELECT 2 UNION ALL SELECT 3) k WHERE m.purged_at IS NULL`, nil},
		{`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload)
		SELECT id, 'gitlab', 'pending', 'pending', 'issue', '{}' FROM mailboxes WHERE number = 1`, nil},
		{d.analyze, nil},
	})
}

// SeedProcessedEvents stores n processed events spread over the store's mailboxes in turn
// (by id), in one statement, their delivery ids prefixed with prefix (which must differ
// between calls on one store), as a long ingest leaves them.
func SeedProcessedEvents(tb testing.TB, s *sqlstore.Store, n int, prefix string) {
	d := seedDialectOf(tb, s)
	seedExec(tb, s, []seedStatement{{seedSeries + `INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at)
		SELECT m.id, 'forgejo', CAST($3 AS TEXT) || g, 'h', 'comment', '{}', ` + d.at("0") + `, ` + d.at("0") + `
		FROM series JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM mailboxes) m
			ON m.k = g % (SELECT count(*) FROM mailboxes)`, []any{n, d.now, prefix + "-"}}})
}
