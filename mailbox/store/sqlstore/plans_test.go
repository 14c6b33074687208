package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
)

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
	runStates := stateList(mailbox.RunStates())
	statements := []struct {
		name, query, args string
	}{
		{"run claim", fmt.Sprintf(sqlLeaseRun, "FOR UPDATE SKIP LOCKED", runStates), "'w', now() + interval '1 minute', now(), 2"},
		{"queued runs", fmt.Sprintf(sqlQueuedRuns, runStates), "now()"},
		{"expired leases", sqlExpiredLeases, "now()"},
		{"unfinished mailboxes", sqlUnfinishedMailboxes, ""},
		{"retention list", sqlPurgeable, "now() - interval '30 days'"},
		{"retention purge of events", `DELETE FROM events WHERE mailbox_id = $1`, "7"},
		{"orphans: leased", sqlLeasedMailboxes, "now()"},
		{"orphans: open", sqlOpenMailboxes, ""},
		{"orphans: live containers", sqlLiveExecutorMailboxes, ""},
		{"reconcile due", sqlReconcileDue, "'gitlab', 50"},
		{"reconcile known repositories", sqlKnownRepos, "'gitlab'"},
		{"reconcile tracked", sqlTracked, "'gitlab', 'acme/r4', 4"},
		{"look-up by merge request, branch, commit", sqlFindBotMailbox, "'gitlab', 'acme/r4', 1004, 'agent/issue-4', md5('4')"},
	}
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
		if st.args != "" {
			exec += "(" + st.args + ")"
		}
		var out string
		require.NoError(t, conn.GetContext(ctx, &out, "EXPLAIN (FORMAT JSON) "+exec), st.name)
		var plans []struct{ Plan planNode }
		require.NoError(t, json.Unmarshal([]byte(out), &plans))
		require.Len(t, plans, 1)
		require.Empty(t, plans[0].Plan.seqScans(), "%s scans whole tables:\n%s", st.name, out)
	}
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
