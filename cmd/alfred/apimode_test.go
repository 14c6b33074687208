package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

const (
	apiModeKey   = "sk-ant-e2e-standin-0123456789abcdef"
	apiModeModel = "claude-standin-1"
)

// apiModeFinals are the stand-in model's final answers per run key: the same questions and
// plan as the script's, the understanding naming what the model read through the tools.
var apiModeFinals = map[string]string{
	"analysis.functional": `{"summary": "Understood.", "understanding": "You want the report exported as CSV; report.py holds MARK-REPORT-PY.",
 "questions": [{"id": "q1", "title": "Which separator?", "context": "Spreadsheets in some locales expect semicolons.",
   "options": [{"id": "a", "label": "Comma", "description": "RFC 4180"}, {"id": "b", "label": "Semicolon", "description": "what Excel expects in Europe"}],
   "default": "a"}]}`,
	"analysis.technical": `{"summary": "Planned.", "plan": "1. Add export.csv with the header row (report.py: MARK-REPORT-PY).\n2. Wire the Export button."}`,
}

// pushFile commits name with content on the bare repository's main branch.
func pushFile(t *testing.T, bare, name, content string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "push")
	for _, args := range [][]string{{"clone", "-q", bare, work}} {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(work, name), []byte(content), 0o644))
	for _, args := range [][]string{{"add", name}, {"-c", "user.name=seed", "-c", "user.email=seed@example.org", "commit", "-qm", "add " + name},
		{"push", "-q", "origin", "main"}} {
		out, err := exec.Command("git", append([]string{"-C", work}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
}

// apiModeAgents is the script agent's configuration with an anthropic-api agent bound to the
// analysis, on the stand-in srv, its key in a file.
func apiModeAgents(t testing.TB, script string, srv *apimodetest.Server) string {
	agents, _ := scriptAgents(t, script)
	keyFile := filepath.Join(t.TempDir(), "anthropic.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(apiModeKey+"\n"), 0o600))
	api := fmt.Sprintf(`  - name: analyst
    adapter: anthropic-api
    model: %s
    api_key_file: %s
    base_url: %s
    prices:
      %s: {input_usd_per_mtok: 3, output_usd_per_mtok: 15}
phases:
  analysis: analyst
`, apiModeModel, keyFile, srv.BaseURL(), apiModeModel)
	return strings.Replace(agents, "phases:\n", api, 1)
}

// The lifecycle with the functional and technical analysis in API mode and the development on
// the script agent in its container: the questions, the plan and the merge request as with
// CLIs, no container for the analyses, their tokens and cost in the status comment.
func TestLifecycleAPIModeAnalysis(t *testing.T) {
	t.Parallel()
	for _, store := range e2eStores {
		t.Run("store="+store, func(t *testing.T) {
			t.Parallel()
			lifecycleAPIMode(t, store)
		})
	}
}

func lifecycleAPIMode(t *testing.T, store string) {
	ctx := context.Background()
	var readReport []string // what the model read of report.py, per analysis run
	srv := apimodetest.NewAnthropic(t, apiModeKey, apiModeModel, func(ex apimodetest.Exchange) apimodetest.Reply {
		if len(ex.Results) == 0 {
			return apimodetest.Reply{Calls: []apimodetest.Call{{Name: "list_dir", Args: map[string]any{"path": "."}},
				{Name: "read_file", Args: map[string]any{"path": "report.py"}}}, InputTokens: 1200, OutputTokens: 40}
		}
		readReport = append(readReport, ex.Results[1].Content)
		if !strings.Contains(ex.Results[1].Content, "MARK-REPORT-PY") {
			return apimodetest.Reply{Text: "the file could not be read"}
		}
		return apimodetest.Reply{Text: apiModeFinals[ex.Key()], InputTokens: 2400, OutputTokens: 200}
	})
	e := startE2EWith(t, store, forge.KindForgejo, "acceptance/sandbox", 24*time.Hour, apiModeAgents(t, lifecycleScript, srv))
	pushFile(t, e.bare, "report.py", "def report():\n    return 'MARK-REPORT-PY'\n")

	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(e.comments(), "\n"), "### q1. Which separator?") },
		e2eWait, 100*time.Millisecond, "no question block:\n%s", strings.Join(e.comments(), "\n---\n"))
	e.waitStatus("status::waiting_info")
	require.Contains(t, strings.Join(e.comments(), "\n"), "MARK-REPORT-PY", "the understanding names what the model read")
	require.Equal(t, http.StatusAccepted, e.send("006-issue_comment-created", func(doc map[string]any) {
		doc["comment"].(map[string]any)["body"] = "q1: b"
		doc["comment"].(map[string]any)["id"] = 4242
	}))
	e.waitStatus("status::waiting_validation")
	require.Contains(t, e.forgejo.IssueBody(e.issue), "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, strings.Join(e.comments(), "\n"), "1. Add export.csv with the header row (report.py: MARK-REPORT-PY).")

	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(e.forgejo.IssueLabels(e.issue)...)))
	e.waitStatus("status::in_ci")
	mrs := e.forgejo.MergeRequests("acceptance/sandbox")
	require.Len(t, mrs, 1)
	out, err := exec.Command("git", "-C", e.bare, "show", mrs[0].SourceBranch+":export.csv").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "date;amount;category\n", string(out), "the development ran on the script agent")

	require.Len(t, readReport, 2, "both analyses read report.py through the tools")
	require.Equal(t, 4, srv.Calls(), "two turns per analysis")

	// The analyses ran without a container: the only container record is the development's.
	mb, err := e.srv.store.Find(ctx, e.issue)
	require.NoError(t, err)
	var names []string
	require.NoError(t, e.srv.store.DB().SelectContext(ctx, &names, `SELECT container_name FROM executors WHERE mailbox_id = $1 ORDER BY id`, mb.ID))
	require.Len(t, names, 1, "%v", names)
	require.Contains(t, names[0], "-development-")

	// Their usage is in llm_sessions, API mode, no session.
	rows, err := e.srv.store.Sessions(ctx, mb.ID)
	require.NoError(t, err)
	runs, err := e.srv.store.Runs(ctx, mb.ID)
	require.NoError(t, err)
	keys := map[int64]string{}
	for _, r := range runs {
		keys[r.ID] = phase.KeyOf(phase.Phase(r.Phase), phase.Step(r.Step))
	}
	require.Len(t, rows, 2)
	for _, r := range runs {
		if r.Phase == string(phase.Analysis) {
			require.Empty(t, r.Container, "API mode names no container")
		}
	}
	for i, r := range rows {
		require.Equal(t, []string{"analysis.functional", "analysis.technical"}[i], keys[*r.RunID])
		require.Equal(t, "analyst", r.Adapter)
		require.Equal(t, apiModeModel, r.Model)
		require.Equal(t, runner.FallbackAPIMode, r.FallbackReason)
		require.Empty(t, r.Name)
		require.Empty(t, r.NativeID)
		require.True(t, r.Succeeded)
		require.Equal(t, int64(3600), r.TokensIn)
		require.Equal(t, int64(240), r.TokensOut)
		require.InDelta(t, (3600*3+240*15)/1e6, r.CostUSD, 1e-9)
	}

	// The status comment shows the analyses' tokens and cost.
	var status string
	for _, c := range e.comments() {
		if strings.Contains(c, "### Alfred status") {
			status = c
		}
	}
	require.Contains(t, status, "| analysis | 2 |")
	require.Contains(t, status, "| 7200 | 480 | $0.0288 |", status)
	for _, c := range e.comments() {
		require.NotContains(t, c, apiModeKey)
	}
	e.requireUniqueMarkers()

	// The metrics count the analyses' tokens and cost under their adapter.
	reg := e.srv.metrics.Registry()
	require.InDelta(t, 7200, counterValue(t, reg, "alfred_llm_tokens_total", "analyst", "input"), 0)
	require.InDelta(t, 0.0288, counterValue(t, reg, "alfred_llm_cost_usd_total", "analyst"), 1e-9)
}

// counterValue returns the value of one counter series of a family in reg, by its label values
// in the order the family declares them.
func counterValue(t *testing.T, reg *prometheus.Registry, family string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			var vals []string
			for _, l := range m.GetLabel() {
				vals = append(vals, l.GetValue())
			}
			if strings.Join(vals, ",") == strings.Join(labels, ",") {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v in the registry", family, labels)
	return 0
}

// A CLI phase after API-mode runs starts its own session and says why: the analyses in API mode
// (no session), then the development on the stand-in claude-code CLI, fresh with fallback
// reason after_api_mode.
func TestLifecycleAPIModeThenCLISession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := apimodetest.NewAnthropic(t, apiModeKey, apiModeModel, apimodetest.Analyst("report.py", apiModeFinals))
	cli := runtimetest.Client(t)
	image := agenttest.BuildImageOnce(t, ctx, cli)
	keyFile := filepath.Join(t.TempDir(), "anthropic.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(apiModeKey), 0o600))
	e := startE2EWith(t, storePostgres, forge.KindForgejo, "acceptance/sandbox", time.Hour, fmt.Sprintf(`
agents:
  - name: claude
    adapter: claude-code
    image: %s
    api_key: sk-test-key-1234567890
  - name: analyst
    adapter: anthropic-api
    model: %s
    api_key_file: %s
    base_url: %s
phases:
  default: claude
  analysis: analyst
`, image, apiModeModel, keyFile, srv.BaseURL()))
	pushFile(t, e.bare, "report.py", "def report():\n    return 'MARK-REPORT-PY'\n")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitStatus("status::waiting_info")
	require.Equal(t, http.StatusAccepted, e.send("006-issue_comment-created", func(doc map[string]any) {
		doc["comment"].(map[string]any)["body"] = "q1: a"
		doc["comment"].(map[string]any)["id"] = 4243
	}))
	e.waitStatus("status::waiting_validation")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(e.forgejo.IssueLabels(e.issue)...)))
	e.waitStatus("status::in_ci")

	mb, err := e.srv.store.Find(ctx, e.issue)
	require.NoError(t, err)
	rows, err := e.srv.store.Sessions(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	for _, r := range rows[:2] {
		require.Equal(t, "analyst", r.Adapter)
		require.Equal(t, runner.FallbackAPIMode, r.FallbackReason)
		require.Zero(t, r.ReportedCost, "no price configured: unrated")
		require.Positive(t, r.TokensIn)
	}
	dev := rows[2]
	require.Equal(t, "claude", dev.Adapter)
	require.Equal(t, mb.Branch, dev.Name)
	require.NotEmpty(t, dev.NativeID)
	require.False(t, dev.Resumed)
	require.Equal(t, runner.FallbackAfterAPIMode, dev.FallbackReason)
}
