package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// A whole lifecycle with the stand-in claude-code CLI: llm_sessions shows one session, fresh at
// the functional analysis and resumed by the technical analysis, the development and the CI fix.
func TestLifecycleOneClaudeSessionAcrossPhases(t *testing.T) {
	t.Parallel()
	cli := runtimetest.Client(t)
	image := agenttest.BuildImageOnce(t, context.Background(), cli)
	e := startE2EWith(t, storePostgres, forge.KindForgejo, "acceptance/sandbox", time.Hour, fmt.Sprintf(`
agents:
  - name: claude
    adapter: claude-code
    image: %s
    api_key: sk-test-key-1234567890
phases:
  default: claude
`, image))
	ctx := context.Background()
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitStatus("status::waiting_validation")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(e.forgejo.IssueLabels(e.issue)...)))
	e.waitStatus("status::in_ci")

	mr := e.forgejo.MergeRequests(e.issue.Repo)[0]
	head := func() string {
		out, err := exec.Command("git", "-C", e.bare, "rev-parse", mr.SourceBranch).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	first := head()
	e.forgejo.SetCI(e.issue.Repo, first, forgetest.CIJob{Name: "ci/test", State: forge.CIFailed, Log: "FAIL"})
	require.Eventually(t, func() bool { return head() != first }, e2eWait, 100*time.Millisecond, "no ci_fix push")
	e.forgejo.SetCI(e.issue.Repo, head(), forgetest.CIJob{Name: "ci/test", State: forge.CISuccess})
	e.waitStatus("status::in_review")

	mb, err := e.srv.store.Find(ctx, e.issue)
	require.NoError(t, err)
	rows, err := e.srv.store.Sessions(ctx, mb.ID)
	require.NoError(t, err)
	runs, err := e.srv.store.Runs(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, rows, 4, "one session row per run")
	keys := map[int64]string{}
	for _, r := range runs {
		keys[r.ID] = phase.KeyOf(phase.Phase(r.Phase), phase.Step(r.Step))
	}
	var got []string
	for i, r := range rows {
		got = append(got, keys[*r.RunID])
		require.Equal(t, mb.Branch, r.Name, "named after the branch")
		require.Equal(t, rows[0].NativeID, r.NativeID, "one session")
		require.True(t, r.Succeeded)
		if i == 0 {
			require.False(t, r.Resumed)
			require.Equal(t, runner.FallbackNoPriorSession, r.FallbackReason)
		} else {
			require.True(t, r.Resumed, "run %s resumed", keys[*r.RunID])
		}
	}
	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development", "ci_fix"}, got)

	// Each run's container record knows its session.
	var execs []struct {
		Supports bool   `db:"supports_session_resume"`
		Native   string `db:"native_session_id"`
		Session  *int64 `db:"session_id"`
	}
	require.NoError(t, e.srv.store.DB().SelectContext(ctx, &execs, `SELECT supports_session_resume,
		native_session_id, session_id FROM executors WHERE mailbox_id = $1 ORDER BY id`, mb.ID))
	require.Len(t, execs, 4)
	for _, x := range execs {
		require.True(t, x.Supports)
		require.Equal(t, rows[0].NativeID, x.Native)
		require.NotNil(t, x.Session)
	}
}
