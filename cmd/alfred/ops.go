package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/go-chi/chi/v5"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/internal/metrics"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// opsRoutes adds the operator's side to the admin listener: GET /metrics on guarded (the
// routes behind the admin token) and the pages under /ui on top, behind admin.PageAuth with
// the same token (a browser signs in once, its session kept in the store; scripts send the
// Bearer header).
func (s *server) opsRoutes(top, guarded chi.Router, reader web.Reader) error {
	guarded.Method(http.MethodGet, "/metrics", s.metrics.Handler())
	// The forms' CSRF key is derived from the admin token: the same on every replica, changed
	// with the token.
	key := sha256.Sum256([]byte("alfred pages csrf key\x00" + s.cfg.Admin.Token.Reveal()))
	pages, err := web.New(web.Config{Reader: reader, Logs: s.runtime.logs, Settings: settingsView{cfg: s.cfg, cursors: s.store.PollCursor},
		Redact: s.cfg.Censor().String, Logger: s.log, IssueURL: issueURL(s.cfg), Backlog: s.store.Backlog,
		PullRequests: func(name string) bool { f, ok := s.cfg.Forge(name); return ok && f.Kind != forge.KindGitLab },
		Controls:     controls{store: s.store, workers: s.workers, log: s.log}, CSRFKey: key[:]})
	if err != nil {
		return err
	}
	top.Handle(web.Prefix+"/*", guardPages(s.cfg.Admin.Token.Reveal(), s.store, s.tokenTries, pages))
	top.Handle(web.Prefix, http.RedirectHandler(web.Prefix+"/", http.StatusMovedPermanently))
	return nil
}

// guardPages puts pages behind admin.PageAuthWith with the admin token, the operators'
// sessions kept in the store (every replica sharing it knows them; a restart keeps them), the
// tries of a token counted in tries (shared with the Bearer-only routes).
func guardPages(token string, sessions admin.OperatorSessions, tries *admin.Attempts, pages http.Handler) http.Handler {
	return admin.PageAuthWith(web.Prefix, token, admin.PageOptions{Sessions: sessions, Attempts: tries}, pages)
}

// controls is web.Controls on the store (pause, resume and cancel, each recorded in the
// mailbox's timeline) and the workers (drain; a resume wakes them).
type controls struct {
	store   *sqlstore.Store
	workers *mailbox.Workers
	log     *slog.Logger
}

// pageErr maps the store's not found to the pages'.
func pageErr(err error) error {
	if errors.Is(err, mailbox.ErrNotFound) {
		return fmt.Errorf("%w: %w", web.ErrNotFound, err)
	}
	return err
}

func (c controls) PauseMailbox(ctx context.Context, id int64, by string) error {
	return pageErr(c.store.PauseMailbox(ctx, id, by))
}

func (c controls) ResumeMailbox(ctx context.Context, id int64, by string) error {
	err := pageErr(c.store.ResumeMailbox(ctx, id, by))
	c.workers.Notify()
	return err
}

func (c controls) PauseProject(ctx context.Context, forgeName, repo, by string) error {
	return c.store.PauseProject(ctx, forgeName, repo, by)
}

func (c controls) ResumeProject(ctx context.Context, forgeName, repo, by string) error {
	err := c.store.ResumeProject(ctx, forgeName, repo, by)
	c.workers.Notify()
	return err
}

func (c controls) CancelRun(ctx context.Context, id int64, by string) error {
	return pageErr(c.store.RequestCancel(ctx, id, by))
}

// Drain sets the installation-wide drain in the store (every replica reads it each second)
// and follows it here at once.
func (c controls) Drain(ctx context.Context, on bool, by string) error {
	if err := c.store.SetControl(ctx, mailbox.ControlDrain, on, by); err != nil {
		return err
	}
	c.workers.Drain(on)
	c.log.Warn("operator changed the drain of the installation", "draining", on, "by", by)
	return nil
}

func (c controls) Draining() bool { return c.workers.Draining() }

// PauseAll sets the installation-wide pause of all claims in the store (each claim reads it).
func (c controls) PauseAll(ctx context.Context, on bool, by string) error {
	if err := c.store.SetControl(ctx, mailbox.ControlPause, on, by); err != nil {
		return err
	}
	if !on {
		c.workers.Notify()
	}
	c.log.Warn("operator changed the pause of all claims", "paused", on, "by", by)
	return nil
}

// replicasSeen is how far back the pages list replicas: a replica records itself at each
// change and at least every 30 s (mailbox.WorkerConfig.ReplicaHeartbeat), so one not seen for
// this long has stopped.
const replicasSeen = 10 * time.Minute

func (c controls) Installation(ctx context.Context) (web.Installation, error) {
	st, err := c.store.InstallationControls(ctx)
	if err != nil {
		return web.Installation{}, err
	}
	rs, err := c.store.Replicas(ctx, time.Now().Add(-replicasSeen))
	if err != nil {
		return web.Installation{}, err
	}
	out := web.Installation{Paused: st.Paused, PausedBy: st.PausedBy}
	for _, r := range rs {
		out.Replicas = append(out.Replicas, web.Replica{ID: r.ID, SeenAt: r.SeenAt, Draining: r.Draining, Drained: r.Drained})
	}
	return out, nil
}

// dockerLogs is web.LiveLogs on the Docker engine: the combined output of a run's container.
type dockerLogs struct{ cli *client.Client }

func (d dockerLogs) RunLog(ctx context.Context, name string, maxBytes int) (string, error) {
	if d.cli == nil {
		return "", fmt.Errorf("no Docker engine: %w", web.ErrNotFound)
	}
	rc, err := d.cli.ContainerLogs(ctx, name, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("container %s: %w", name, web.ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	defer rc.Close()
	buf := &tailBuffer{max: maxBytes}
	if _, err := stdcopy.StdCopy(buf, buf, rc); err != nil {
		return "", err
	}
	return string(buf.bytes()), nil
}

// tailBuffer keeps the last max bytes written to it, in at most about twice that memory
// whatever is written (a flooded container's log is read whole to reach its end).
type tailBuffer struct {
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte { return t.b[max(0, len(t.b)-t.max):] }

// settingsView is web.Settings on the configuration; the global settings also show each
// forge's transport and, for a polled forge, its last poll (cursors: the store's).
type settingsView struct {
	cfg     *config.Config
	cursors func(ctx context.Context, forgeName string) (mailbox.PollCursor, error)
}

func (v settingsView) Effective(project string) ([]web.Setting, error) {
	var out []web.Setting
	for _, x := range v.cfg.For(project).Entries() {
		out = append(out, web.Setting{Name: x.Key, Value: x.Value, Source: x.Source})
	}
	if project == "" {
		out = append(out, v.transports()...)
	}
	return out, nil
}

// transports describes each forge's transport: "webhook", or "poll every 15s: last poll …"
// with the last failure when the latest poll failed.
func (v settingsView) transports() []web.Setting {
	var out []web.Setting
	for _, f := range v.cfg.Forges {
		value := f.Transport.String()
		if f.Transport.Poll() {
			value += fmt.Sprintf(" (every %s)", f.PollEvery())
			if v.cursors != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				cur, err := v.cursors(ctx, f.Name)
				cancel()
				switch {
				case err != nil:
					value += ": the last poll could not be read"
				case cur.Error != "":
					value += fmt.Sprintf(": the poll fails since %s: %s", cur.FailedAt.UTC().Format(time.RFC3339), cur.Error)
				case cur.PolledAt.IsZero():
					value += ": not polled yet"
				default:
					value += ": last poll " + cur.PolledAt.UTC().Format(time.RFC3339)
				}
			}
		}
		out = append(out, web.Setting{Name: "forges[" + f.Name + "].transport", Value: value, Source: "forge " + f.Name})
	}
	return out
}

func (v settingsView) Projects() []string {
	set := map[string]bool{}
	for k := range v.cfg.Scopes {
		set[k] = true
	}
	for k := range v.cfg.Sessions.Overrides {
		set[k] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// newMetrics builds the registry; gauges and inserts read the store at scrape time (nil: none).
func newMetrics(gauges func(context.Context) (metrics.Gauges, error), inserts func() metrics.InsertCounts) *metrics.Metrics {
	return metrics.New(metrics.Config{Gauges: gauges, Inserts: inserts,
		ReconciliationFindings: []string{"missed_event", "new_assignment", "discovered_repository", "unattributed"}})
}

// insertCounts reads the store's grouped insertion of events for the metrics.
func insertCounts(st *sqlstore.Store) func() metrics.InsertCounts {
	return func() metrics.InsertCounts {
		n := st.InsertStats()
		return metrics.InsertCounts{Statements: n.Statements, Deliveries: n.Deliveries, Waiting: n.Waiting}
	}
}

// reconcilePass records a reconciliation pass in the metrics: the events it derived, the new
// assignments it found, the repositories it found by their hooks and the changes it could not
// attribute.
func reconcilePass(m *metrics.Metrics) func(mailbox.PassStats) {
	return func(st mailbox.PassStats) {
		m.ReconciliationPass(map[string]int{"missed_event": st.Events, "new_assignment": st.NewAssignments,
			"discovered_repository": st.Discovered, "unattributed": st.Unattributed}, st.Err)
	}
}

// scopedSettings is what the machine needs of a project's effective settings. A phase binding
// is passed only when the project's scope (not the global configuration) sets it, so the runner
// keeps its own binding otherwise.
func scopedSettings(e config.Effective) mailbox.Settings {
	s := mailbox.Settings{BranchPrefix: e.BranchPrefix, QuestionDeadline: e.QuestionDeadline,
		CIFixAttempts: e.CIFixAttempts, BudgetUSD: e.BudgetUSD, AutoMerge: e.AutoMerge,
		MergeMethod: forge.MergeMethod(e.MergeMethod), Shadow: e.Shadow, SelfReview: e.SelfReview}
	for p, a := range e.Phases {
		if src := e.Sources["phases."+p]; strings.HasPrefix(src, "org ") || strings.HasPrefix(src, "project ") {
			if s.Agents == nil {
				s.Agents = map[string]string{}
			}
			s.Agents[p] = a
		}
	}
	return s
}

// retention is the sweep of closed mailboxes' texts, with each project's retention_days; nil
// when no scope purges anything (retention_days 0 everywhere).
func (s *server) retention() *mailbox.Retention {
	days := []int{s.cfg.RetentionDays}
	for _, sc := range s.cfg.Scopes {
		if sc.RetentionDays != nil {
			days = append(days, *sc.RetentionDays)
		}
	}
	least := mailbox.MinRetentionDays(days...)
	if least == 0 {
		return nil
	}
	return &mailbox.Retention{Store: s.store, Logger: s.log, MinDays: least,
		Days: func(repo string) int { return s.cfg.For(repo).RetentionDays }}
}

// logEndpoints says, at start-up, where each forge's webhook must point and where the pages are.
func logEndpoints(log *slog.Logger, cfg *config.Config, listen string) {
	base := cfg.PublicURL
	if base == "" {
		base = "http://" + listen
	}
	for _, f := range cfg.Forges {
		log.Info("set this webhook URL on "+f.Name, "forge", f.Name, "url", doctor.WebhookURL(base, f.Name))
	}
	if cfg.Admin.Listen != "" {
		log.Info("operator pages and metrics (admin token)", "pages", "http://"+cfg.Admin.Listen+web.Prefix+"/",
			"metrics", "http://"+cfg.Admin.Listen+"/metrics")
	} else {
		log.Info("operator pages and metrics off: set admin.listen and admin.token_file to serve them")
	}
}

// issueURL links an issue or merge request on its configured forge: Forgejo
// <base>/<repo>/issues/<n> (pulls for a pull request), GitLab <base>/<path>/-/issues/<n>
// (merge_requests).
func issueURL(cfg *config.Config) func(forgeName, repo string, number int64, mr bool) string {
	return func(forgeName, repo string, number int64, mr bool) string {
		f, ok := cfg.Forge(forgeName)
		if !ok {
			return ""
		}
		kind := "issues"
		if f.Kind == forge.KindGitLab {
			if mr {
				kind = "merge_requests"
			}
			return fmt.Sprintf("%s/%s/-/%s/%d", f.BaseURL, repo, kind, number)
		}
		if mr {
			kind = "pulls"
		}
		return fmt.Sprintf("%s/%s/%s/%d", f.BaseURL, repo, kind, number)
	}
}
