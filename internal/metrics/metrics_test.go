package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/metrics"
	"github.com/alfred-bot/alfred/runner/phase"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

func TestFamiliesAndValues(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{
		Gauges: func(context.Context) (metrics.Gauges, error) {
			return metrics.Gauges{MailboxesByState: map[string]int{"idle": 2, "done": 1}, RunsQueued: 3, RunsRunning: 1,
				EventsUnprocessed: 30093, OldestUnprocessed: 90 * time.Second}, nil
		},
		Inserts:                func() metrics.InsertCounts { return metrics.InsertCounts{Statements: 4, Deliveries: 10, Waiting: 2} },
		ReconciliationFindings: []string{"missing_label"},
	})
	m.Delivery("gitea", "issues", "accepted", 20*time.Millisecond)
	m.Run("analysis", metrics.RunSucceeded, 3*time.Second)
	m.Usage("claude-code", 100, 20, 0.25, true)
	m.Usage("codex", 50, 5, 0, false)
	m.ForgeCall("gitea", "GET /api/v1/user", 200, 5*time.Millisecond)
	m.ReconciliationPass(map[string]int{"missing_label": 2}, nil)

	out := scrape(t, m)
	for _, want := range []string{
		`alfred_webhook_deliveries_total{answer="accepted",event="issues",forge="gitea"} 1`,
		`alfred_webhook_ack_duration_seconds_count{forge="gitea"} 1`,
		`alfred_runs_total{outcome="succeeded",phase="analysis"} 1`,
		`alfred_run_duration_seconds_sum{phase="analysis"} 3`,
		`alfred_llm_tokens_total{adapter="claude-code",direction="input"} 100`,
		`alfred_llm_cost_usd_total{adapter="claude-code"} 0.25`,
		`alfred_llm_unrated_runs_total{adapter="codex"} 1`,
		`alfred_forge_api_requests_total{forge="gitea",operation="GET /api/v1/user",status="200"} 1`,
		`alfred_forge_api_request_duration_seconds_count{forge="gitea",operation="GET /api/v1/user"} 1`,
		`alfred_reconciliation_passes_total{result="ok"} 1`,
		`alfred_reconciliation_passes_total{result="failed"} 0`,
		`alfred_reconciliation_findings_total{kind="missing_label"} 2`,
		`alfred_mailboxes{state="idle"} 2`,
		`alfred_runs_queued 3`,
		`alfred_runs_running 1`,
		`alfred_events_unprocessed 30093`,
		`alfred_events_oldest_unprocessed_seconds 90`,
		`alfred_event_insert_statements_total 4`,
		`alfred_event_insert_deliveries_total 10`,
		`alfred_event_inserts_waiting 2`,
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "repo=")
	require.NotContains(t, out, "issue=")
}

func TestGaugeErrorIsCounted(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{Gauges: func(context.Context) (metrics.Gauges, error) {
		return metrics.Gauges{}, errors.New("database down")
	}})
	out := scrape(t, m)
	require.Contains(t, out, "alfred_metrics_gauge_errors_total 1")
	require.NotContains(t, out, "alfred_runs_queued ")
}

func TestNilMetricsDoesNothing(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Delivery("a", "b", "c", time.Second)
	m.Run("a", "b", time.Second)
	m.Usage("a", 1, 1, 1, true)
	m.ForgeCall("a", "b", 200, time.Second)
	m.ReconciliationPass(nil, nil)
	h := http.NotFoundHandler()
	require.NotNil(t, m.DeliveryMiddleware(nil, h))
	require.Equal(t, http.DefaultTransport, m.Transport("a", nil))
}

func TestDeliveryMiddleware(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	h := m.DeliveryMiddleware([]string{"gitea"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Test") {
		case "dup":
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"status":"duplicate","delivery":"x"}`)
		case "bad":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"status":"error","error":"missing or invalid signature"}`)
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"status":"accepted","delivery":"x"}`)
		}
	}))
	send := func(path, event, test string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
		req.Header.Set("X-Gitea-Event", event)
		req.Header.Set("X-Test", test)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	send("/webhooks/gitea", "issues", "")
	send("/webhooks/gitea", "Issue Hook", "dup")
	send("/webhooks/gitea", "issues", "bad")
	send("/webhooks/nope", "made-up event", "")
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))

	out := scrape(t, m)
	for _, want := range []string{
		`alfred_webhook_deliveries_total{answer="accepted",event="issues",forge="gitea"} 1`,
		`alfred_webhook_deliveries_total{answer="duplicate",event="issue_hook",forge="gitea"} 1`,
		`alfred_webhook_deliveries_total{answer="unauthorized",event="unverified",forge="gitea"} 1`,
		`alfred_webhook_deliveries_total{answer="accepted",event="other",forge="unknown"} 1`,
		`alfred_webhook_ack_duration_seconds_count{forge="gitea"} 3`,
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 4, testutil.CollectAndCount(m.Registry(), "alfred_webhook_deliveries_total"))
}

func TestTransportCountsEachRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	m := metrics.New(metrics.Config{})
	c := &http.Client{Transport: m.Transport("gl", nil)}
	for _, p := range []string{"/api/v4/projects/acme%2Fshop/issues/12/notes", "/api/v4/projects/7/missing"} {
		resp, err := c.Get(srv.URL + p)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	_, err := c.Get("http://127.0.0.1:1/api/v4/user")
	require.Error(t, err)
	out := scrape(t, m)
	require.Contains(t, out, `alfred_forge_api_requests_total{forge="gl",operation="GET /api/v4/projects/{project}/issues/{n}/notes",status="200"} 1`)
	require.Contains(t, out, `alfred_forge_api_requests_total{forge="gl",operation="GET /api/v4/projects/{project}/missing",status="404"} 1`)
	require.Contains(t, out, `alfred_forge_api_requests_total{forge="gl",operation="GET /api/v4/user",status="error"} 1`)
	require.NotContains(t, out, "acme")
}

func TestOperation(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/api/v1/repos/alice/sandbox/issues/3/comments":                             "GET /api/v1/repos/{owner}/{repo}/issues/{n}/comments",
		"/api/v1/repos/alice/sandbox/collaborators/bob/permission":                  "GET /api/v1/repos/{owner}/{repo}/collaborators/{name}/permission",
		"/api/v1/repos/a/b/commits/0123456789abcdef0123456789abcdef01234567/status": "GET /api/v1/repos/{owner}/{repo}/commits/{ref}/status",
		"/api/v4/projects/g%2Fsub%2Fp/hooks":                                        "GET /api/v4/projects/{project}/hooks",
		"/api/v1/users/alfred":                                                      "GET /api/v1/users/{name}",
	} {
		require.Equal(t, want, metrics.Operation(http.MethodGet, in), in)
	}
}

type jobs struct{ out *phase.Outcome }

func (j jobs) Execute(context.Context, phase.Job) (*phase.Outcome, error) { return j.out, nil }
func (jobs) Cleanup(context.Context, int64) error                         { return nil }
func (jobs) RemoveSessions(int64) error                                   { return nil }

func TestInstrumentJobs(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	j := m.InstrumentJobs(jobs{out: &phase.Outcome{Session: &phase.SessionRecord{Adapter: "claude-code",
		TokensIn: 10, TokensOut: 3, CostUSD: 0.02, ReportedCost: 0.02}}})
	_, err := j.Execute(t.Context(), phase.Job{Input: phase.Input{Phase: phase.Development}})
	require.NoError(t, err)
	j = m.InstrumentJobs(jobs{out: &phase.Outcome{Failure: "no result"}})
	_, _ = j.Execute(t.Context(), phase.Job{Input: phase.Input{Phase: phase.Development}})
	out := scrape(t, m)
	require.Contains(t, out, `alfred_runs_total{outcome="succeeded",phase="development"} 1`)
	require.Contains(t, out, `alfred_runs_total{outcome="failed",phase="development"} 1`)
	require.Contains(t, out, `alfred_llm_cost_usd_total{adapter="claude-code"} 0.02`)
	require.Contains(t, out, `alfred_llm_tokens_total{adapter="claude-code",direction="output"} 3`)
	require.Contains(t, out, `alfred_phase_runs_started_total{phase="development"} 2`)
	require.NotContains(t, out, `alfred_phase_reruns_total{`, "no decision ran twice")

	_, _ = j.Execute(t.Context(), phase.Job{Input: phase.Input{Phase: phase.Development}, Rerun: true})
	out = scrape(t, m)
	require.Contains(t, out, `alfred_phase_reruns_total{phase="development"} 1`)
	require.Contains(t, out, `alfred_phase_runs_started_total{phase="development"} 3`)
	require.EqualValues(t, 1, m.Reruns())
}

type recoveringJobs struct{ jobs }

func (recoveringJobs) Recover(context.Context, phase.Job, bool) (*phase.Outcome, error) {
	return &phase.Outcome{Recovered: true}, nil
}

// The machine finds the runner's Recover by type: the instrumented runner keeps it.
func TestInstrumentJobsKeepsRecover(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	j := m.InstrumentJobs(recoveringJobs{})
	r, ok := j.(interface {
		Recover(context.Context, phase.Job, bool) (*phase.Outcome, error)
	})
	require.True(t, ok)
	_, err := r.Recover(t.Context(), phase.Job{Input: phase.Input{Phase: phase.Development}}, true)
	require.NoError(t, err)
	require.Contains(t, scrape(t, m), `alfred_runs_total{outcome="succeeded",phase="development"} 1`)
	_, ok = m.InstrumentJobs(jobs{}).(interface {
		Recover(context.Context, phase.Job, bool) (*phase.Outcome, error)
	})
	require.False(t, ok)
}

// TestOutcomeCountsEveryAgentRun: every run whose agent ran is counted, with its cost or as
// unrated — also without a session record (sessions off, an adapter without sessions), which
// once counted nowhere; a run whose agent did not run counts neither.
func TestOutcomeCountsEveryAgentRun(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	jobs := m.InstrumentJobs(&outcomes{[]*phase.Outcome{
		{Adapter: "script", Result: &phase.Result{Summary: "done"}},              // no session, no cost reported
		{Adapter: "script", Failure: "no result"},                                // no session, failed before reporting
		{Adapter: "claude", Result: &phase.Result{CostUSD: 0.5, InputTokens: 7}}, // no session, cost reported
		{Adapter: "codex", Session: &phase.SessionRecord{Adapter: "codex", TokensIn: 3}, Result: &phase.Result{}},
		{Result: &phase.Result{Summary: "The branch already contains main."}}, // no agent ran
	}})
	for range 5 {
		_, err := jobs.Execute(context.Background(), phase.Job{Input: phase.Input{Phase: phase.Development}})
		require.NoError(t, err)
	}
	out := scrape(t, m)
	for _, want := range []string{
		`alfred_llm_unrated_runs_total{adapter="script"} 2`,
		`alfred_llm_unrated_runs_total{adapter="codex"} 1`,
		`alfred_llm_cost_usd_total{adapter="claude"} 0.5`,
		`alfred_llm_tokens_total{adapter="claude",direction="input"} 7`,
		`alfred_runs_total{outcome="succeeded",phase="development"} 4`,
		`alfred_runs_total{outcome="failed",phase="development"} 1`,
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, `alfred_llm_unrated_runs_total{adapter="claude"}`)
	require.NotContains(t, out, `adapter=""`, "a run without an agent is no adapter's")
}

// outcomes is a metrics.Jobs whose Execute returns its outcomes in turn.
type outcomes struct{ list []*phase.Outcome }

func (o *outcomes) Execute(context.Context, phase.Job) (*phase.Outcome, error) {
	out := o.list[0]
	o.list = o.list[1:]
	return out, nil
}
func (o *outcomes) Cleanup(context.Context, int64) error { return nil }
func (o *outcomes) RemoveSessions(int64) error           { return nil }

// TestHostileOutputIsCounted: every reason of a run's refused or bounded output is counted
// once, and every reason is visible at 0 before the first.
func TestHostileOutputIsCounted(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	require.Contains(t, scrape(t, m), `alfred_hostile_output_total{reason="link"} 0`)
	jobs := m.InstrumentJobs(&outcomes{[]*phase.Outcome{
		{Adapter: "script", Failure: "refused result.json", HostileOutput: []string{"link"}},
		{Adapter: "script", Result: &phase.Result{}, HostileOutput: []string{"log_flood"}},
		{Adapter: "script", Failure: "refused result.json", HostileOutput: []string{"not_regular", "log_flood"}},
	}})
	for range 3 {
		_, err := jobs.Execute(context.Background(), phase.Job{Input: phase.Input{Phase: phase.Development}})
		require.NoError(t, err)
	}
	out := scrape(t, m)
	for _, want := range []string{
		`alfred_hostile_output_total{reason="link"} 1`,
		`alfred_hostile_output_total{reason="not_regular"} 1`,
		`alfred_hostile_output_total{reason="log_flood"} 2`,
		`alfred_hostile_output_total{reason="deadline"} 0`,
	} {
		require.Contains(t, out, want)
	}
}
