package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // SQLite driver

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/migrations"
)

// backgroundStatement is a statement Alfred issues on its own, with sample arguments: as SQL
// literals for PostgreSQL's EXECUTE (pg), as values for SQLite (lite; times in Unix
// microseconds, as the SQLite store writes them, from now).
type backgroundStatement struct {
	name, query, pg string
	lite            func(now int64) []any
}

// backgroundStatements lists the self-issued statements; lock is the engine's row lock of the
// run workers' claim.
func backgroundStatements(lock string) []backgroundStatement {
	runStates := stateList(mailbox.RunStates())
	day := int64(24 * time.Hour / time.Microsecond)
	nowArg := func(now int64) []any { return []any{now} }
	none := func(int64) []any { return nil }
	return []backgroundStatement{
		{"run claim", fmt.Sprintf(sqlLeaseRun, lock, runStates), "'w', now() + interval '1 minute', now(), 2",
			func(now int64) []any { return []any{"w", now + 60_000_000, now, 2} }},
		{"queued runs", fmt.Sprintf(sqlQueuedRuns, runStates), "now()", nowArg},
		{"expired leases", sqlExpiredLeases, "now()", nowArg},
		{"unfinished mailboxes", sqlUnfinishedMailboxes, "", none},
		{"retention list", sqlPurgeable, "now() - interval '30 days'", func(now int64) []any { return []any{now - 30*day} }},
		{"retention purge of events", `DELETE FROM events WHERE mailbox_id = $1`, "7", func(int64) []any { return []any{7} }},
		{"retention purge of shadow writes", `DELETE FROM shadow_writes WHERE mailbox_id = $1`, "7", func(int64) []any { return []any{7} }},
		{"shadow overlay", sqlShadowWrites, "'gitlab', 'acme/r4', 4, false", func(int64) []any { return []any{"gitlab", "acme/r4", 4, false} }},
		{"orphans: leased", sqlLeasedMailboxes, "now()", nowArg},
		{"orphans: open", sqlOpenMailboxes, "", none},
		{"orphans: live containers", sqlLiveExecutorMailboxes, "", none},
		{"reconcile due", sqlReconcileDue, "'gitlab', 50", func(int64) []any { return []any{"gitlab", 50} }},
		{"reconcile known repositories", sqlKnownRepos, "'gitlab'", func(int64) []any { return []any{"gitlab"} }},
		{"reconcile tracked", sqlTracked, "'gitlab', 'acme/r4', 4", func(int64) []any { return []any{"gitlab", "acme/r4", 4} }},
		{"look-up by merge request, branch, commit", sqlFindBotMailbox, "'gitlab', 'acme/r4', 1004, 'agent/issue-4', md5('4')",
			func(int64) []any { return []any{"gitlab", "acme/r4", 1004, "agent/issue-4", "x"} }},
	}
}

// Every statement Alfred issues on its own reads the due or matching rows through an index:
// PostgreSQL's plan for it, the generic plan a prepared statement keeps, scans none of the
// tables that grow with every mailbox ever created. The tables hold 5,000 closed mailboxes
// (purged by retention, but for their processed events: a project that keeps everything) with
// their runs and container records, and a few open ones.
func TestBackgroundStatementsScanNoTable(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO mailboxes (forge, repo, number, state, closed_at, purged_at, updated_at, wake_at,
			branch, head_sha, mr_number, lease_owner, lease_expires_at)
		SELECT 'gitlab', 'acme/r' || (g % 5), g,
			CASE WHEN g = 3 THEN 'in_development' WHEN g = 4 THEN 'in_ci' WHEN g <= 5 THEN 'idle' ELSE 'done' END,
			CASE WHEN g > 5 THEN now() - interval '90 days' END,
			CASE WHEN g > 5 THEN now() - interval '60 days' END,
			CASE WHEN g > 5 THEN now() - interval '90 days' ELSE now() END,
			CASE WHEN g <= 3 THEN now() - interval '1 minute' END,
			'agent/issue-' || g, md5(g::text), 1000 + g,
			CASE WHEN g = 4 THEN 'other' END, CASE WHEN g = 4 THEN now() + interval '1 hour' END
		FROM generate_series(1, 5000) AS g`,
		`INSERT INTO runs (mailbox_id, phase, attempt, status, finished_at)
		SELECT id, 'development', 1, CASE WHEN number = 4 THEN 'running' ELSE 'succeeded' END,
			CASE WHEN number <> 4 THEN now() END FROM mailboxes`,
		`INSERT INTO executors (run_id, mailbox_id, container_name, status)
		SELECT id, mailbox_id, 'alfred-' || id, CASE WHEN status = 'running' THEN 'ready' ELSE 'stopped' END FROM runs`,
		`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, processed_at)
		SELECT id, 'gitlab', id || '-' || k, 'h', 'issue', '{}', CASE WHEN number <> 1 OR k > 1 THEN now() END
		FROM mailboxes, generate_series(1, 3) AS k`,
		`ANALYZE mailboxes, events, runs, executors, questions`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	statements := backgroundStatements("FOR UPDATE SKIP LOCKED")
	conn, err := db.Connx(ctx)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = conn.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	for i, st := range statements {
		name := fmt.Sprintf("p%d", i)
		_, err := conn.ExecContext(ctx, "PREPARE "+name+" AS "+st.query)
		require.NoError(t, err, st.name)
		exec := "EXECUTE " + name
		if st.pg != "" {
			exec += "(" + st.pg + ")"
		}
		var out string
		require.NoError(t, conn.GetContext(ctx, &out, "EXPLAIN (FORMAT JSON) "+exec), st.name)
		var plans []struct{ Plan planNode }
		require.NoError(t, json.Unmarshal([]byte(out), &plans))
		require.Len(t, plans, 1)
		require.Empty(t, plans[0].Plan.seqScans(), "%s scans whole tables:\n%s", st.name, out)
	}
}

// The same on SQLite: its query plan of each self-issued statement searches indexes and scans
// no table whole (nor a whole index, but for the small partial ones: open mailboxes, held
// leases, live containers, running runs, unpurged closed mailboxes, pending events), nor every
// mailbox of a repository.
func TestBackgroundStatementsScanNoTableSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlx.Open("sqlite", filepath.Join(t.TempDir(), "alfred.db")+"?_foreign_keys=1&_time_integer_format=unix_micro")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, migrations.Apply(ctx, db.DB, migrations.SQLite))
	now := time.Now().UnixMicro()
	day := int64(24 * time.Hour / time.Microsecond)
	for _, q := range []string{
		`WITH RECURSIVE series (g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM series WHERE g < 5000)
		INSERT INTO mailboxes (forge, repo, number, state, closed_at, purged_at, updated_at, wake_at,
			branch, head_sha, mr_number, lease_owner, lease_expires_at)
		SELECT 'gitlab', 'acme/r' || (g % 5), g,
			CASE WHEN g = 3 THEN 'in_development' WHEN g = 4 THEN 'in_ci' WHEN g <= 5 THEN 'idle' ELSE 'done' END,
			CASE WHEN g > 5 THEN $1 - 90 * $2 END, CASE WHEN g > 5 THEN $1 - 60 * $2 END,
			CASE WHEN g > 5 THEN $1 - 90 * $2 ELSE $1 END, CASE WHEN g <= 3 THEN $1 - 60000000 END,
			'agent/issue-' || g, 'sha' || g, 1000 + g,
			CASE WHEN g = 4 THEN 'other' END, CASE WHEN g = 4 THEN $1 + 3600000000 END
		FROM series`,
		`INSERT INTO runs (mailbox_id, phase, attempt, status, finished_at)
		SELECT id, 'development', 1, CASE WHEN number = 4 THEN 'running' ELSE 'succeeded' END,
			CASE WHEN number <> 4 THEN $1 END FROM mailboxes`,
		`INSERT INTO executors (run_id, mailbox_id, container_name, status)
		SELECT id, mailbox_id, 'alfred-' || id, CASE WHEN status = 'running' THEN 'ready' ELSE 'stopped' END FROM runs`,
		`INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, processed_at)
		SELECT id, 'gitlab', id || '-' || k.k, 'h', 'issue', '{}', CASE WHEN number <> 1 OR k.k > 1 THEN $1 END
		FROM mailboxes, (SELECT 1 AS k UNION ALL SELECT 2 UNION ALL SELECT 3) k`,
		`ANALYZE`,
	} {
		args := []any{}
		if strings.Contains(q, "$2") {
			args = []any{now, day}
		} else if strings.Contains(q, "$1") {
			args = []any{now}
		}
		_, err := db.ExecContext(ctx, q, args...)
		require.NoError(t, err)
	}
	small := []string{"mailboxes_open", "mailboxes_leased", "executors_live", "runs_running",
		"mailboxes_purgeable", "events_pending", "mailboxes_reconcile", "mailboxes_due_wake"}
	ctes := []string{"due", "known", "CONSTANT"} // the statements' own rows
	for _, st := range backgroundStatements("") {
		rows, err := db.QueryxContext(ctx, "EXPLAIN QUERY PLAN "+st.query, st.lite(now)...)
		require.NoError(t, err, st.name)
		var plan, scans []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
			f := strings.Fields(detail)
			whole := f[0] == "SCAN" && !slices.Contains(ctes, f[1]) && !slicesContainsAny(detail, small)
			// Every mailbox of a repository, through the unique key's first two columns (not
			// paused_projects, whose whole key that is: one row).
			repo := strings.HasSuffix(detail, "(forge=? AND repo=?)") && !strings.Contains(detail, "paused_projects")
			if whole || repo {
				scans = append(scans, detail)
			}
		}
		require.NoError(t, rows.Err())
		require.Empty(t, scans, "%s scans whole:\n%s", st.name, strings.Join(plan, "\n"))
	}
}

// slicesContainsAny reports whether s contains one of subs.
func slicesContainsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// planNode is a node of PostgreSQL's EXPLAIN (FORMAT JSON) output.
type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Plans    []planNode `json:"Plans"`
}

// seqScans lists the tables the plan reads whole.
func (p planNode) seqScans() []string {
	var out []string
	if strings.Contains(p.NodeType, "Seq Scan") {
		out = append(out, p.Relation)
	}
	for _, c := range p.Plans {
		out = append(out, c.seqScans()...)
	}
	return out
}

// The look-ups of pending events read the pending events only, never every event a mailbox
// ever had: one mailbox holding 3,000 processed events and 2 pending ones, as under a steady
// ingest (no ANALYZE, as a fresh database has none). Through events_mailbox the pass's read
// and the claim's check grew with the events stored, and ingest with them.
func TestPendingLookupsReadOnlyPendingEventsSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlx.Open("sqlite", filepath.Join(t.TempDir(), "alfred.db")+"?_foreign_keys=1&_time_integer_format=unix_micro")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, migrations.Apply(ctx, db.DB, migrations.SQLite))
	for _, q := range []string{
		`INSERT INTO mailboxes (forge, repo, number, state, updated_at) VALUES ('gitlab', 'acme/r', 1, 'idle', 1)`,
		`WITH RECURSIVE series (g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM series WHERE g < 3002)
		INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, processed_at)
		SELECT 1, 'gitlab', 'd-' || g, 'h', 'issue', '{}', CASE WHEN g <= 3000 THEN 1 END FROM series`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for _, st := range []struct {
		name, query string
		args        []any
	}{
		{"a pass's pending events", sqlPendingEvents, []any{1}},
		{"the oldest pending event", sqlOldestPending, nil},
		{"the backlog", sqlBacklog, nil},
		{"a mailbox with pending events", `SELECT count(*) FROM mailboxes m
			WHERE EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL)`, nil},
	} {
		rows, err := db.QueryxContext(ctx, "EXPLAIN QUERY PLAN "+st.query, st.args...)
		require.NoError(t, err, st.name)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Err())
		all := strings.Join(plan, "\n")
		require.Contains(t, all, "events_pending", "%s: not through the pending index:\n%s", st.name, all)
		require.NotContains(t, all, "events_mailbox", "%s reads every event of the mailbox:\n%s", st.name, all)
		for _, d := range plan {
			require.NotEqual(t, "SCAN events", d, "%s reads every event:\n%s", st.name, all)
		}
	}
}
