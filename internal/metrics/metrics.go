// Package metrics holds Alfred's Prometheus registry and metric families, and the small
// instrumentation API the receiver, the runner, the forge clients and the reconciler call.
//
// Every family is named alfred_…, and no family has a per-issue or per-repository label, so
// the number of series stays bounded by the configuration (forges, phases, adapters) whatever
// the number of issues. Every method works on a nil *Metrics and then does nothing, so a
// component built without metrics (a test, a subcommand) needs no check.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/alfred-bot/alfred/internal/base/runfile"
)

// Namespace prefixes every family.
const Namespace = "alfred"

// Outcomes of a run, the values of the outcome label of alfred_runs_total.
const (
	RunSucceeded   = "succeeded"
	RunFailed      = "failed"
	RunInterrupted = "interrupted"
	RunError       = "error" // infrastructure failure: Docker or git unavailable
)

// Reconciliation pass results, the values of the result label of
// alfred_reconciliation_passes_total.
const (
	PassOK     = "ok"
	PassFailed = "failed"
)

// Gauges is what the store knows at scrape time: how many mailboxes are in each state and
// how many runs wait or run. The store answers it (Config.Gauges); nothing else keeps it.
type Gauges struct {
	// MailboxesByState counts open and closed mailboxes by their state ("idle", "running",
	// "blocked", "done", …).
	MailboxesByState map[string]int
	// RunsQueued counts mailboxes with work waiting for a worker (unprocessed events or a due
	// wake-up) and no lease.
	RunsQueued int
	// RunsRunning counts runs started and not finished.
	RunsRunning int
	// EventsUnprocessed counts the stored events no worker has applied yet: the backlog of
	// event processing.
	EventsUnprocessed int
	// OldestUnprocessed is how long the oldest of them has waited since it was received (0
	// when there is none).
	OldestUnprocessed time.Duration
}

// InsertCounts is the store's grouped insertion of events, since it started: the grouped
// insert statements run and the deliveries they carried (their ratio is the mean group), and
// the deliveries waiting now for a flusher.
type InsertCounts struct {
	Statements, Deliveries, Waiting int64
}

// Config configures New.
type Config struct {
	// Gauges reads the gauges at scrape time; nil leaves alfred_mailboxes, alfred_runs_queued,
	// alfred_runs_running and alfred_events_unprocessed (and _oldest_unprocessed_seconds) out of
	// the output. An error is counted in
	// alfred_metrics_gauge_errors_total and the gauges are skipped for that scrape.
	Gauges func(ctx context.Context) (Gauges, error)
	// Inserts reads the store's grouped insertion of events at scrape time; nil leaves
	// alfred_event_insert_* out of the output.
	Inserts func() InsertCounts
	// GaugeTimeout bounds one Gauges call; 0 means 5 s.
	GaugeTimeout time.Duration
	// ReconciliationFindings are the kinds of drift the reconciler reports (alfred_
	// reconciliation_findings_total{kind}); each starts at 0 so that the family is visible
	// before the first pass.
	ReconciliationFindings []string
}

// Metrics is the registry and its families. Build it with New; the zero value is not
// usable, but a nil *Metrics is (every method then does nothing).
type Metrics struct {
	reg *prometheus.Registry

	deliveries *prometheus.CounterVec
	ackSeconds *prometheus.HistogramVec
	runs       *prometheus.CounterVec
	started    *prometheus.CounterVec
	reruns     *prometheus.CounterVec
	rerunSum   atomic.Int64 // reruns summed over the phases (Reruns)
	runSeconds *prometheus.HistogramVec
	tokens     *prometheus.CounterVec
	cost       *prometheus.CounterVec
	unrated    *prometheus.CounterVec
	forgeCalls *prometheus.CounterVec
	forgeSecs  *prometheus.HistogramVec
	passes     *prometheus.CounterVec
	findings   *prometheus.CounterVec
	refused    *prometheus.CounterVec
	egress     *prometheus.CounterVec
	hostile    *prometheus.CounterVec
}

// New builds the registry with every Alfred family, plus the Go runtime and process
// collectors.
func New(cfg Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "webhook_deliveries_total",
		Help: "Webhook deliveries received, by forge name, event (the forge's event header, normalised) and answer (accepted, ignored, duplicate, bad_request, unauthorized, unavailable, …)."},
		[]string{"forge", "event", "answer"})
	m.ackSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace,
		Name:    "webhook_ack_duration_seconds",
		Help:    "Time from the start of a delivery's handling (its body read, a handling slot taken) to its answer, by forge name.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}},
		[]string{"forge"})
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "runs_total",
		Help: "Agent runs finished, by phase and outcome (succeeded, failed, interrupted, error)."},
		[]string{"phase", "outcome"})
	m.started = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "phase_runs_started_total",
		Help: "Agent runs started (handed to the runner), by phase."},
		[]string{"phase"})
	m.reruns = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "phase_reruns_total",
		Help: "Agent runs started for a decision (mailbox, phase, step) that already had a run still recorded running or a collected result never applied: a phase run twice for one decision (0 is the exactly-once promise), by phase."},
		[]string{"phase"})
	m.runSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace,
		Name:    "run_duration_seconds",
		Help:    "Wall time of an agent run (worktree, container, collect, push), by phase.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 2400, 3600}},
		[]string{"phase"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "llm_tokens_total",
		Help: "Model tokens used by runs (each run's own share), by adapter and direction (input, output)."},
		[]string{"adapter", "direction"})
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "llm_cost_usd_total",
		Help: "Model cost in US dollars reported by the adapters for runs (each run's own share), by adapter. Runs whose adapter reports no cost are in alfred_llm_unrated_runs_total."},
		[]string{"adapter"})
	m.unrated = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "llm_unrated_runs_total",
		Help: "Runs whose adapter reported no cost, by adapter."},
		[]string{"adapter"})
	m.forgeCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "forge_api_requests_total",
		Help: "Forge API requests (each attempt, retries included), by forge name, operation (method and path template) and status (HTTP code, or \"error\" without a response)."},
		[]string{"forge", "operation", "status"})
	m.forgeSecs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace,
		Name:    "forge_api_request_duration_seconds",
		Help:    "Latency of one forge API request attempt, by forge name and operation.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
		[]string{"forge", "operation"})
	m.passes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "reconciliation_passes_total",
		Help: "Reconciliation passes (forge state compared with the mailboxes), by result (ok, failed)."},
		[]string{"result"})
	m.findings = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "reconciliation_findings_total",
		Help: "What reconciliation passes found and repaired, by kind."},
		[]string{"kind"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "refused_inputs_total",
		Help: "Human inputs the authorization gate did not allow (refused or ignored), by input kind (mailbox/gate) and reason."},
		[]string{"kind", "reason"})
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "egress_refused_total",
		Help: "Connections a run asked its egress proxy for and was refused (the destination is not on runner.egress.allow), by phase."},
		[]string{"phase"})
	m.hostile = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace,
		Name: "hostile_output_total",
		Help: "What Alfred refused or bounded of what runs left, by reason (link: a symbolic link leading out of the run's directory; not_regular: a FIFO, a device, a directory; too_large; deadline; log_flood: output beyond the logs' bound, head and tail kept; nested_repository: a repository left inside the worktree)."},
		[]string{"reason"})
	for _, r := range []string{runfile.ReasonLink, runfile.ReasonNotRegular, runfile.ReasonTooLarge, runfile.ReasonDeadline, runfile.ReasonLogFlood, runfile.ReasonNestedRepository} {
		m.hostile.WithLabelValues(r)
	}
	for _, r := range []string{PassOK, PassFailed} {
		m.passes.WithLabelValues(r)
	}
	for _, k := range cfg.ReconciliationFindings {
		m.findings.WithLabelValues(k)
	}
	m.reg.MustRegister(m.deliveries, m.ackSeconds, m.runs, m.started, m.reruns, m.runSeconds, m.tokens, m.cost,
		m.unrated, m.forgeCalls, m.forgeSecs, m.passes, m.findings, m.refused, m.egress, m.hostile,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Gauges != nil {
		m.reg.MustRegister(&gaugeCollector{read: cfg.Gauges, timeout: cfg.GaugeTimeout})
	}
	if cfg.Inserts != nil {
		m.reg.MustRegister(insertCollector(cfg.Inserts))
	}
	return m
}

// RefusedInput counts one human input the authorization gate did not allow: kind is the
// input's kind (mailbox/gate.Kind), reason gate.Reason's ("role_below_write") or
// "enabler_lost_write". The signature is mailbox.Config.Refused's.
func (m *Metrics) RefusedInput(kind, reason string) { m.refused.WithLabelValues(kind, reason).Inc() }

// Registry returns the registry, for tests and for registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text (or OpenMetrics) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Delivery counts one webhook delivery and its acknowledgement latency.
func (m *Metrics) Delivery(forgeName, event, answer string, ack time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(forgeName, event, answer).Inc()
	m.ackSeconds.WithLabelValues(forgeName).Observe(ack.Seconds())
}

// EgressRefused counts one connection a run of phase was refused by its egress proxy.
func (m *Metrics) EgressRefused(phase string) {
	if m == nil {
		return
	}
	m.egress.WithLabelValues(phase).Inc()
}

// RunStarted counts one run of phase handed to the runner; rerun says the store found its
// decision already run (phase.Job.Rerun).
func (m *Metrics) RunStarted(phase string, rerun bool) {
	if m == nil {
		return
	}
	m.started.WithLabelValues(phase).Inc()
	if rerun {
		m.reruns.WithLabelValues(phase).Inc()
		m.rerunSum.Add(1)
	}
}

// Reruns returns alfred_phase_reruns_total summed over the phases: the runs started again for
// a decision already run (the replica benchmark reports it).
func (m *Metrics) Reruns() int64 {
	if m == nil {
		return 0
	}
	return m.rerunSum.Load()
}

// Run counts one finished run of phase with its outcome (RunSucceeded, …) and duration.
func (m *Metrics) Run(phase, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(phase, outcome).Inc()
	m.runSeconds.WithLabelValues(phase).Observe(d.Seconds())
}

// Usage adds one run's tokens and cost for adapter. rated is false when the adapter reported
// no cost; the run is then counted as unrated instead of adding 0 dollars.
func (m *Metrics) Usage(adapter string, tokensIn, tokensOut int64, costUSD float64, rated bool) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(adapter, "input").Add(float64(max(tokensIn, 0)))
	m.tokens.WithLabelValues(adapter, "output").Add(float64(max(tokensOut, 0)))
	if rated {
		m.cost.WithLabelValues(adapter).Add(max(costUSD, 0))
	} else {
		m.unrated.WithLabelValues(adapter).Inc()
	}
}

// ForgeCall counts one forge API request attempt. status is the HTTP status, 0 when no
// response came (a dial error, a cancelled context).
func (m *Metrics) ForgeCall(forgeName, operation string, status int, d time.Duration) {
	if m == nil {
		return
	}
	s := "error"
	if status > 0 {
		s = strconv.Itoa(status)
	}
	m.forgeCalls.WithLabelValues(forgeName, operation, s).Inc()
	m.forgeSecs.WithLabelValues(forgeName, operation).Observe(d.Seconds())
}

// ReconciliationPass counts one reconciliation pass: err nil is PassOK, else PassFailed;
// found adds what the pass found, by kind (kinds with 0 may be omitted).
func (m *Metrics) ReconciliationPass(found map[string]int, err error) {
	if m == nil {
		return
	}
	result := PassOK
	if err != nil {
		result = PassFailed
	}
	m.passes.WithLabelValues(result).Inc()
	for k, n := range found {
		if n > 0 {
			m.findings.WithLabelValues(k).Add(float64(n))
		}
	}
}

// gaugeCollector asks the store for the gauges at each scrape, and counts the scrapes it
// could not answer (in the same scrape).
type gaugeCollector struct {
	read    func(ctx context.Context) (Gauges, error)
	timeout time.Duration
	errors  atomic.Int64
}

var (
	mailboxesDesc = prometheus.NewDesc(Namespace+"_mailboxes",
		"Mailboxes by state, as the store holds them at scrape time.", []string{"state"}, nil)
	queuedDesc = prometheus.NewDesc(Namespace+"_runs_queued",
		"Mailboxes with work waiting for a worker and no lease, at scrape time.", nil, nil)
	runningDesc = prometheus.NewDesc(Namespace+"_runs_running",
		"Runs started and not finished, at scrape time.", nil, nil)
	unprocessedDesc = prometheus.NewDesc(Namespace+"_events_unprocessed",
		"Stored events no worker has applied yet (the backlog of event processing), at scrape time.", nil, nil)
	oldestDesc = prometheus.NewDesc(Namespace+"_events_oldest_unprocessed_seconds",
		"How long the oldest unprocessed event has waited since it was received, at scrape time (0: none).", nil, nil)
	gaugeErrorsDesc = prometheus.NewDesc(Namespace+"_metrics_gauge_errors_total",
		"Scrapes whose store gauges (mailboxes, runs queued or running) could not be read.", nil, nil)
)

func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mailboxesDesc
	ch <- queuedDesc
	ch <- runningDesc
	ch <- unprocessedDesc
	ch <- oldestDesc
	ch <- gaugeErrorsDesc
}

func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	timeout := c.timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g, err := c.read(ctx)
	if err != nil {
		c.errors.Add(1)
	}
	ch <- prometheus.MustNewConstMetric(gaugeErrorsDesc, prometheus.CounterValue, float64(c.errors.Load()))
	if err != nil {
		return
	}
	for state, n := range g.MailboxesByState {
		ch <- prometheus.MustNewConstMetric(mailboxesDesc, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(g.RunsQueued))
	ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(g.RunsRunning))
	ch <- prometheus.MustNewConstMetric(unprocessedDesc, prometheus.GaugeValue, float64(g.EventsUnprocessed))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, g.OldestUnprocessed.Seconds())
}

// insertCollector reads the store's grouped insertion of events at each scrape.
type insertCollector func() InsertCounts

var (
	insertStatementsDesc = prometheus.NewDesc(Namespace+"_event_insert_statements_total",
		"Grouped insert statements of webhook events run by the store.", nil, nil)
	insertDeliveriesDesc = prometheus.NewDesc(Namespace+"_event_insert_deliveries_total",
		"Deliveries carried by the grouped insert statements (divided by the statements: the mean group).", nil, nil)
	insertWaitingDesc = prometheus.NewDesc(Namespace+"_event_inserts_waiting",
		"Deliveries waiting for the store to insert them, at scrape time.", nil, nil)
)

func (c insertCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- insertStatementsDesc
	ch <- insertDeliveriesDesc
	ch <- insertWaitingDesc
}

func (c insertCollector) Collect(ch chan<- prometheus.Metric) {
	n := c()
	ch <- prometheus.MustNewConstMetric(insertStatementsDesc, prometheus.CounterValue, float64(n.Statements))
	ch <- prometheus.MustNewConstMetric(insertDeliveriesDesc, prometheus.CounterValue, float64(n.Deliveries))
	ch <- prometheus.MustNewConstMetric(insertWaitingDesc, prometheus.GaugeValue, float64(n.Waiting))
}
