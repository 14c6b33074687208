package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// opsScript is the development step of the operations test: held after its log lines until
// the test has seen the live log page and writes opsRelease into the run's output directory,
// so the page is the live one however slow the machine is.
const opsScript = `
development:
  summary: Added the CSV export.
  commit_message: "Add CSV export"
  log: ["step 1: reading report.go", "step 2: writing export.csv"]
  wait_for_file: ` + opsRelease + `
  files:
    export.csv: "date;amount;category\n"
`

// opsRelease is the file that releases the held development run of opsScript.
const opsRelease = "release"

// TestOperations runs a lifecycle with the stand-in claude-code CLI for the analyses and a slow
// scripted development, and checks what an operator sees: the pages (loaded in headless
// Chromium, screenshots saved) while the development runs and after, the metrics, and the
// status comment of the finished lifecycle (golden).
func TestOperations(t *testing.T) {
	t.Parallel()
	cli := runtimetest.Client(t)
	claude := agenttest.BuildImageOnce(t, context.Background(), cli)
	script := scriptImage(t)
	scriptPath := filepath.Join(t.TempDir(), "script.yaml")
	require.NoError(t, os.WriteFile(scriptPath, []byte(opsScript), 0o644))
	browser := webtest.NewBrowser(t)
	e := startE2EWith(t, storeSQLite, forge.KindForgejo, "acceptance/sandbox", time.Hour, fmt.Sprintf(`
agents:
  - name: claude
    adapter: claude-code
    image: %s
    api_key: sk-test-key-1234567890
  - name: script
    adapter: script
    image: %s
    script: %s
phases:
  default: claude
  development: script
`, claude, script, scriptPath))
	// The admin listener (admin.listen): the pages and the metrics, behind the admin token.
	adminSrv := httptest.NewServer(e.srv.admin)
	t.Cleanup(adminSrv.Close)
	// Signed in once with the login form (the token is never in a URL); each page is then
	// opened in the same tab, its DOM read and a screenshot saved.
	tab := browser.Tab(t)
	tab.SignIn(t, adminSrv.URL+web.Prefix+"/login", e2eAdminToken)
	load := func(path, name string) webtest.Page {
		t.Helper()
		tab.Open(t, adminSrv.URL+path)
		return webtest.Page{DOM: tab.DOM(t), Screenshot: tab.Screenshot(t, name)}
	}

	// The development runs: wait until its container's log shows the agent's lines.
	mb, r := e.toRunningDevelopment(func(r web.RunSummary) bool {
		return strings.Contains(opsGet(t, adminSrv.URL+fmt.Sprintf("%s/runs/%d/log", web.Prefix, r.ID)), "step 2: writing export.csv")
	})
	devRun := r.ID

	p := load(web.Prefix+"/", "ops-mailboxes")
	require.Contains(t, p.DOM, "acceptance/sandbox#1")
	require.Contains(t, p.DOM, `/acceptance/sandbox/issues/1"`, "linked to the forge")
	require.Contains(t, p.DOM, `<span class="badge running">running</span>`)
	require.Contains(t, p.DOM, "development")
	p = load(fmt.Sprintf("%s/mailboxes/%d", web.Prefix, mb.ID), "ops-mailbox")
	require.Contains(t, p.DOM, "<div>claude</div>", "the agent of the session")
	require.Contains(t, p.DOM, mb.Branch, "the session name")
	require.Contains(t, p.DOM, "resumed")
	require.Regexp(t, `native id <code>[0-9a-f-]{36}</code>`, p.DOM)
	p = load(fmt.Sprintf("%s/runs/%d", web.Prefix, devRun), "ops-run-live")
	require.Contains(t, p.DOM, "live container log")
	require.Contains(t, p.DOM, "step 1: reading report.go")
	require.NotContains(t, p.DOM, "sk-test-key-1234567890")
	// Release the held run: from here it finishes.
	out := filepath.Join(e.srv.cfg.DataDir, "runs", r.Container, "out")
	require.DirExists(t, out, "the run's output directory")
	require.NoError(t, os.WriteFile(filepath.Join(out, opsRelease), nil, 0o644))

	e.waitStatus("status::in_ci")
	mr := e.forgejo.MergeRequests(e.issue.Repo)[0]
	e.forgejo.SetCI(e.issue.Repo, headOf(t, e.bare, mr.SourceBranch), forgetest.CIJob{Name: "ci/test", State: forge.CISuccess})
	e.waitStatus("status::in_review")
	e.forgejo.MarkMerged(e.issue.Repo, mr.Number)
	require.Equal(t, http.StatusAccepted, e.send("022-pull_request-closed", func(doc map[string]any) {
		doc["number"] = mr.Number
		doc["pull_request"].(map[string]any)["number"] = mr.Number
		doc["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = mr.SourceBranch
	}))
	e.waitStatus("status::done")
	e.requireUniqueMarkers()

	// The status comment of the finished lifecycle: cost per phase and in total.
	var status string
	require.Eventually(t, func() bool {
		for _, c := range e.comments() {
			if k, _, ok := mailbox.ParseMarker(c); ok && k == mailbox.ProgressKey && strings.Contains(c, "**Finished**") {
				status = c
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "no finished status comment")
	goldenOps(t, "status_finished.md", regexp.MustCompile(`\b\d+(h|m|s)(\d+m)?(\d+s)?\b`).ReplaceAllString(status, "<t>"))

	p = load(fmt.Sprintf("%s/runs/%d", web.Prefix, devRun), "ops-run-finished")
	require.Contains(t, p.DOM, "stored output of the finished run")
	require.Regexp(t, `<dt>Cost</dt><dd class="cost">unrated</dd>`, p.DOM, "the script adapter reports no cost")
	// The scripted development has no session record: unrated, never free, in its row and in
	// the sums, as the status comment says.
	p = load(fmt.Sprintf("%s/mailboxes/%d", web.Prefix, mb.ID), "ops-mailbox-finished")
	require.Regexp(t, `Cost so far</dt><dd>\$0\.\d{4} \+ 1 unrated run · `, p.DOM)
	require.Regexp(t, fmt.Sprintf(`(?s)data-run="%d".*?class="cost">unrated<`, devRun), p.DOM)
	require.NotContains(t, p.DOM, "$0.0000")
	p = load(web.Prefix+"/", "ops-mailboxes-finished")
	require.Regexp(t, `<td>\$0\.\d{4} \+ 1 unrated run</td>`, p.DOM)
	require.NotContains(t, p.DOM, "$0.0000")

	// Every family, with values where work happened.
	require.Contains(t, opsGetToken(t, adminSrv.URL+"/metrics", "wrong"), "unauthorized")
	metricsText := opsGet(t, adminSrv.URL+"/metrics")
	for _, re := range []string{
		`alfred_webhook_deliveries_total\{answer="accepted",event="issue_assign",forge="forgejo"\} [1-9]`,
		`alfred_webhook_ack_duration_seconds_count\{forge="forgejo"\} [1-9]`,
		`alfred_mailboxes\{state="done"\} 1`,
		`alfred_runs_total\{outcome="succeeded",phase="analysis"\} 2`,
		`alfred_runs_total\{outcome="succeeded",phase="development"\} 1`,
		`alfred_run_duration_seconds_count\{phase="development"\} 1`,
		`alfred_runs_queued 0`,
		`alfred_events_unprocessed [0-9]+`,
		`alfred_events_oldest_unprocessed_seconds [0-9.e+-]+`,
		`alfred_llm_tokens_total\{adapter="claude",direction="input"\} [1-9]`,
		`alfred_llm_cost_usd_total\{adapter="claude"\} 0\.000[1-9]`,
		`alfred_llm_unrated_runs_total\{adapter="script"\} 1`,
		`alfred_forge_api_requests_total\{forge="forgejo",operation="POST /api/v1/repos/\{owner\}/\{repo\}/issues/\{n\}/comments",status="201"\} [1-9]`,
		`alfred_forge_api_request_duration_seconds_count\{forge="forgejo",operation="GET /api/v1/repos/\{owner\}/\{repo\}/issues/\{n\}"\} [1-9]`,
		`alfred_reconciliation_passes_total\{result="ok"\} [1-9]`,
		`alfred_reconciliation_findings_total\{kind="missed_event"\} [0-9]+`,
		`alfred_event_insert_deliveries_total [1-9][0-9]*`,
		`alfred_event_inserts_waiting 0`,
	} {
		require.Regexp(t, re, metricsText)
	}
	require.NotContains(t, metricsText, "acceptance/sandbox")
}

func opsGet(t *testing.T, url string) string {
	t.Helper()
	return opsGetToken(t, url, e2eAdminToken)
}

func opsGetToken(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func headOf(t *testing.T, bare, branch string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", bare, "rev-parse", branch).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// goldenOps compares got with testdata/name; UPDATE_GOLDEN=1 rewrites it.
func goldenOps(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "UPDATE_GOLDEN=1 writes %s", p)
	require.Equal(t, string(want), got)
}
