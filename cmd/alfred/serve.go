package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/base/httpserve"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/internal/metrics"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/migrations"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/webhook"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// runServe implements "alfred serve": it applies the migrations, removes what a crashed
// process left behind, then serves webhooks and runs the mailbox workers until SIGINT/SIGTERM.
func runServe(ctx context.Context, a *app, args []string) error {
	cfg, _, err := a.configOnly("serve", args)
	if err != nil {
		return err
	}
	log := slog.New(cfg.Censor().Handler(slog.NewTextHandler(a.stderr, nil)))
	srv, err := newServer(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	log.Info("alfred serving", "version", versionString(), "listen", ln.Addr().String(), "forges", len(cfg.Forges))
	logEndpoints(log, cfg, ln.Addr().String())
	err = srv.Serve(ctx, ln)
	log.Info("alfred stopped", "err", err)
	return err
}

// server is a wired Alfred: HTTP edge, workers, runner. Tests build one with newServer and
// point it at stand-in forges.
type server struct {
	cfg     *config.Config
	log     *slog.Logger
	store   *sqlstore.Store
	workers *mailbox.Workers
	recon   *mailbox.Reconciler
	// poller is the polling transport of the forges whose transport includes poll (nil: none).
	poller *mailbox.Poller
	// lifecycle is the machine's configuration (the rebuild from the forge reads it too).
	lifecycle mailbox.Config
	service   *runner.Service
	// runtime is where the runs' containers are (runner.runtime): Docker or Kubernetes.
	runtime *agentRuntime
	handler http.Handler
	metrics *metrics.Metrics
	// admin serves the status endpoints behind the admin token (on cfg.Admin.Listen).
	admin http.Handler
	// tokenTries counts the tries of the admin token per client, for every admin route.
	tokenTries *admin.Attempts
}

// logStore logs the engine and schema version of the store the server opened (the SQLite
// file's path; never the PostgreSQL URL, which may hold a password).
func logStore(ctx context.Context, log *slog.Logger, st *sqlstore.Store, cfg *config.Config) {
	engine := st.Dialect().Name
	attrs := []any{"engine", string(engine)}
	if engine == migrations.SQLite {
		_, path := store.Engine(cfg.DatabaseURL.Reveal(), cfg.DataDir)
		attrs = append(attrs, "path", path)
	}
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		log.Warn("store opened; could not read its schema version", append(attrs, "err", err)...)
		return
	}
	log.Info("store ready, migrations applied", append(attrs, "schema_version", v)...)
}

// newServer opens the store database_url selects (the embedded SQLite database in data_dir
// when empty), applies the migrations and wires every component.
func newServer(ctx context.Context, cfg *config.Config, log *slog.Logger) (*server, error) {
	if err := ensureDir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("create data_dir: %w", err)
	}
	st, err := store.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DataDir, poolOf(cfg.Database), nil)
	if err != nil {
		return nil, err
	}
	logStore(ctx, log, st, cfg)
	s := &server{cfg: cfg, log: log, store: st.WithLogger(log), metrics: newMetrics(st.Gauges, insertCounts(st))}
	if err := s.wire(ctx); err != nil {
		return nil, errors.Join(err, st.Close())
	}
	return s, nil
}

// wire builds the components from the configuration and connects them: the forges, the
// runner service, the mailbox machine and workers, and the HTTP handler.
func (s *server) wire(ctx context.Context) error {
	forges, err := buildForges(s.cfg, s.metrics, s.store)
	if err != nil {
		return err
	}
	if s.service, err = s.buildService(ctx, forges.gits); err != nil {
		return err
	}
	cfg := s.cfg
	s.lifecycle = mailbox.Config{
		Labels:           cfg.Labels,
		QuestionDeadline: cfg.Lifecycle.QuestionDeadline, CIWait: cfg.Lifecycle.CIWait,
		CIPoll: cfg.Lifecycle.CIPoll, Redact: cfg.Censor().String,
		CIFixAttempts: cfg.Lifecycle.CIFixAttempts, BranchPrefix: cfg.Lifecycle.BranchPrefix,
		ReviewFixAttempts: cfg.Lifecycle.ReviewFixAttempts, RetryUntilGreenMax: cfg.Lifecycle.RetryUntilGreenMax,
		ReviewQuiet: cfg.Lifecycle.ReviewQuiet, ReviewVerdicts: cfg.Lifecycle.ReviewVerdicts,
		SelfReview: mailbox.SelfReviewConfig{Enabled: cfg.SelfReview.Enabled, MaxRounds: cfg.SelfReview.MaxRounds,
			AfterFixes: cfg.SelfReview.AfterFixes},
		SessionResume:  func(repo string) bool { return cfg.For(repo).SessionResume },
		Settings:       func(repo string) mailbox.Settings { return scopedSettings(cfg.For(repo)) },
		Usage:          s.store,
		ShadowLog:      s.store,
		PoisonAttempts: cfg.Workers.PoisonAttempts,
		PermissionTTL:  cfg.Permissions.Cache,
		MinApprovals:   cfg.Lifecycle.AutoMergeMinApprovals,
		Refused:        s.metrics.RefusedInput,
	}
	if s.lifecycle.Needs, err = cfg.Permissions.Needs(); err != nil {
		return err
	}
	machine := mailbox.NewMachine(s.lifecycle, s.store, forges.bots, s.metrics.InstrumentJobs(s.service), nil, s.log)
	s.workers = mailbox.NewWorkers(mailbox.WorkerConfig{Count: cfg.Workers.Count, LeaseTTL: cfg.Workers.LeaseTTL,
		Poll: cfg.Workers.PollInterval, Runs: cfg.Workers.Runs, RunsPerProject: cfg.Workers.RunsPerProject}, s.store, machine, s.log)
	s.recon = mailbox.NewReconciler(mailbox.ReconcilerConfig{Interval: cfg.Workers.ReconcileInterval, Batch: cfg.Workers.ReconcileBatch,
		OnPass: reconcilePass(s.metrics), Scopes: reconcileScopes(cfg)},
		s.store, mailbox.WakingInbox{Inbox: s.store, Workers: s.workers}, forges.live, nil, s.log)
	if len(forges.pollers) > 0 {
		s.poller = mailbox.NewPoller(mailbox.PollerConfig{Interval: pollIntervals(cfg), Redact: cfg.Censor().String},
			s.recon, s.store, forges.pollers, s.log)
	}
	s.handler, err = s.buildHandler(forges.sources)
	return err
}

// reconcileScopes is, per forge, what makes a repository without a mailbox this Alfred's: a
// webhook to the URL `alfred doctor` tells the operator to set, or a listing under
// forges[].repositories.
func reconcileScopes(cfg *config.Config) map[string]mailbox.Scope {
	out := map[string]mailbox.Scope{}
	for _, f := range cfg.Forges {
		out[f.Name] = mailbox.Scope{HookURL: doctor.WebhookURL(publicURLOrListen(cfg), f.Name), Repositories: f.Repositories,
			AnyRepository: f.Transport.Poll() && len(f.Repositories) == 0}
	}
	return out
}

// pollIntervals is the poll interval of every forge whose transport includes poll.
func pollIntervals(cfg *config.Config) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, f := range cfg.Forges {
		if f.Transport.Poll() {
			out[f.Name] = f.PollEvery()
		}
	}
	return out
}

// forges holds, per configured forge name, its webhook source, its bot (API client and logins)
// and its git manager.
type forges struct {
	sources map[string]webhook.Source
	// bots are the machine's: a project in shadow mode writes nothing through them
	// (mailbox.Shadow). live are the same clients without the shadow wrapper, for
	// reconciliation, which only reads and must compare the mailboxes with the forge as it is.
	bots map[string]mailbox.Bot
	live map[string]mailbox.Bot
	gits map[string]*gitrepo.Manager
	// pollers are the poll calls of the forges whose transport includes poll.
	pollers map[string]forge.Poller
}

// buildForges builds the webhook source, API client and git manager of every configured forge;
// every API call is counted in m (alfred_forge_api_requests_total). A project in shadow mode
// (the scoped setting) writes nothing to the forge: its writes go to shadow instead. An error
// names the forge.
func buildForges(cfg *config.Config, m *metrics.Metrics, shadow mailbox.ShadowLog) (forges, error) {
	fs := forges{sources: map[string]webhook.Source{}, bots: map[string]mailbox.Bot{},
		live: map[string]mailbox.Bot{}, gits: map[string]*gitrepo.Manager{}, pollers: map[string]forge.Poller{}}
	for _, f := range cfg.Forges {
		src, client, err := newForge(f, &http.Client{Transport: m.Transport(f.Name, nil)})
		if err != nil {
			return forges{}, fmt.Errorf("forge %s: %w", f.Name, err)
		}
		projects := map[string]gitrepo.ProjectSettings{}
		for repo, p := range f.Projects {
			projects[repo] = gitrepo.ProjectSettings{Sparse: p.Sparse, PartialClone: p.PartialClone}
		}
		// A push that would send any configured secret is refused (gitrepo.Manager.ScanPush).
		var secrets []gitrepo.NamedSecret
		for _, ks := range cfg.KeyedSecrets() {
			secrets = append(secrets, gitrepo.NamedSecret{Name: ks.Key, Value: ks.Value.Reveal()})
		}
		g, err := gitrepo.New(gitrepo.Config{DataDir: cfg.DataDir, Username: f.GitUser, Token: f.Token.Reveal(),
			AuthorName: cfg.Lifecycle.GitName, AuthorEmail: cfg.Lifecycle.GitEmail,
			UID: cfg.Runner.UID, GID: cfg.Runner.GID, Projects: projects, Secrets: secrets})
		if err != nil {
			return forges{}, fmt.Errorf("forge %s: git: %w", f.Name, err)
		}
		if f.Transport.Webhook() {
			fs.sources[f.Name] = src
		}
		if p, ok := client.(forge.Poller); ok && f.Transport.Poll() {
			fs.pollers[f.Name] = p
		}
		// Every text posted to the forge passes the censor and the forge's size limits, and
		// mentions no bot. The shadow wrapper sits under the guard, so that what it records is
		// what the forge would have received.
		guard := mailbox.PostGuard{Censor: cfg.Censor().String,
			Limits: mailbox.PostLimits{MaxCommentBytes: f.MaxCommentBytes, MaxDescriptionBytes: f.MaxDescriptionBytes},
			IsBot:  mailbox.Bot{Forge: client, Login: f.BotUser, OtherBots: f.OtherBots}.IsBot}
		shadowed := mailbox.Shadow(client, mailbox.ShadowConfig{Forge: f.Name, BotLogin: f.BotUser, Log: shadow,
			On: func(repo string) bool { return cfg.For(repo).Shadow }})
		fs.bots[f.Name] = mailbox.Bot{Forge: mailbox.GuardPosts(shadowed, guard), Login: f.BotUser, OtherBots: f.OtherBots}
		fs.live[f.Name] = mailbox.Bot{Forge: mailbox.GuardPosts(client, guard), Login: f.BotUser, OtherBots: f.OtherBots}
		fs.gits[f.Name] = g
	}
	return fs, nil
}

// newForge builds the webhook source and the API client of one forge by its kind; hc carries
// the client's requests.
func newForge(f config.Forge, hc *http.Client) (webhook.Source, forge.Forge, error) {
	var (
		src webhook.Source
		err error
	)
	switch {
	case !f.Transport.Webhook(): // polled only: no delivery to verify
	case f.Kind == forge.KindGitLab:
		src, err = gitlab.NewSource(gitlab.SourceConfig{Tokens: []string{f.WebhookSecret.Reveal()}})
	case f.Kind == forge.KindForgejo:
		src, err = forgejo.NewSource(forgejo.SourceConfig{Secrets: []string{f.WebhookSecret.Reveal()}})
	default:
		return nil, nil, fmt.Errorf("unknown kind %q", f.Kind)
	}
	if err != nil {
		return nil, nil, err
	}
	client, err := forgeClient(f, hc)
	return src, client, err
}

// buildService connects to the configured runtime (the Docker engine, or the Kubernetes
// cluster) and builds the runner service: the executor with the configured agents, limits and
// container log, the git managers and the session store.
func (s *server) buildService(ctx context.Context, gits map[string]*gitrepo.Manager) (*runner.Service, error) {
	cfg := s.cfg
	agents, err := buildAgents(cfg)
	if err != nil {
		return nil, err
	}
	rt, err := newRuntime(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.runtime = rt
	if k, ok := rt.Runtime.(*kubernetes.Runtime); ok {
		// The runs' NetworkPolicy, before any run's Pod: no run is ever outside it.
		if err := applyEgressPolicy(ctx, k, cfg, agents, s.log); err != nil {
			return nil, err
		}
	}
	if d, ok := rt.Runtime.(*docker.Runtime); ok {
		// Every connection a run's egress proxy refuses is counted; each destination is logged
		// with the run once (a run looping over refused names fills no log).
		d.OnEgressRefused = func(labels map[string]string, target string, first bool) {
			if first {
				s.log.Warn("egress refused", "target", target, "run_id", labels[runner.LabelRun],
					"mailbox_id", labels[runner.LabelMailbox], "phase", labels[runner.LabelPhase])
			}
			s.metrics.EgressRefused(labels[runner.LabelPhase])
		}
	}
	exec, err := runner.NewExecutor(runner.Config{
		Runtime: rt, Agents: agents, Bindings: cfg.Phases.Bindings(),
		DataDir: cfg.DataDir, UID: cfg.Runner.UID, GID: cfg.Runner.GID,
		Limits: runner.Limits{MemoryBytes: cfg.Runner.MemoryBytes, NanoCPUs: cfg.Runner.NanoCPUs(),
			PIDs: cfg.Runner.PIDs},
		Timeout: cfg.Runner.Timeout, HostNetwork: cfg.Runner.HostNetwork, Egress: egressPolicy(cfg),
		Redact:         cfg.Censor().String,
		MaxOutputBytes: int(cfg.Runner.MaxOutputBytes),
		ContainerLog:   s.store, // every run container is recorded, so a restart finds it again
		Instance:       cfg.Runner.InstanceOf(cfg.DataDir),
	})
	if err != nil {
		return nil, err
	}
	// The data directory's id: where the sessions this replica runs leave their state.
	host, err := runner.StateHost(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	return runner.NewService(exec, gits, runner.SessionConfig{Store: s.store, Dir: filepath.Join(cfg.DataDir, "sessions"),
		UID: cfg.Runner.UID, GID: cfg.Runner.GID, Host: host}, s.log), nil
}

// buildHandler returns the webhook receiver, which stores each delivery and wakes the workers
// (each delivery counted), and sets s.admin: the session endpoint, the metrics and the pages
// behind the admin token.
func (s *server) buildHandler(sources map[string]webhook.Source) (http.Handler, error) {
	receiver, err := webhook.NewReceiver(webhook.ReceiverConfig{
		Sources: sources, Inbox: mailbox.WakingInbox{Inbox: s.store, Workers: s.workers},
		Ready: s.ready, MaxBodyBytes: s.cfg.MaxBodyBytes, Logger: s.log,
	})
	if err != nil {
		return nil, err
	}
	// The webhook port serves webhooks, health and readiness only; state is on the admin
	// listener, behind its token.
	ar := chi.NewRouter()
	ar.Method(http.MethodGet, "/mailboxes/{id}/session",
		admin.SessionHandler(s.store, func(r *http.Request) string { return chi.URLParam(r, "id") }))
	top := chi.NewRouter()
	// One budget of token tries per client, for the pages' login and a Bearer header alike.
	s.tokenTries = admin.NewAttempts(admin.DefaultAttemptLimits())
	if err := s.opsRoutes(top, ar, s.store); err != nil {
		return nil, err
	}
	top.Mount("/", admin.RequireTokenWith(s.cfg.Admin.Token.Reveal(), s.tokenTries, ar))
	s.admin = admin.FrameHeaders(top)
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	return s.metrics.DeliveryMiddleware(names, receiver), nil
}

// ready is the readiness of /readyz: the store's ping, then webhook.ErrDraining while the
// workers drain (still ready: deliveries are stored).
func (s *server) ready(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return err
	}
	if s.workers.Draining() {
		return webhook.ErrDraining
	}
	return nil
}

// buildAgents builds the configured agent adapters by name. An adapter that cannot be built
// (an unknown kind, an unreadable or invalid script, a missing API key) is an error naming the
// agent.
func buildAgents(cfg *config.Config) (map[string]runner.Agent, error) {
	agents := map[string]runner.Agent{}
	for _, ag := range cfg.Agents {
		maxTurns := 0
		if config.IsAPIMode(ag.Adapter) {
			maxTurns = ag.MaxTurns // max_turns is API mode's bound only
		}
		a, err := agent.New(ag.Adapter, agent.Config{Image: ag.Image, Model: ag.Model, APIKey: ag.APIKey.Reveal(),
			BaseURL: ag.BaseURL, APIKeyEnv: ag.APIKeyEnv, Script: ag.Script,
			MaxTurns: maxTurns, MaxTokens: ag.MaxTokens, MaxToolCalls: ag.MaxToolCalls, Prices: agentPrices(ag.Prices)})
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ag.Name, err)
		}
		agents[ag.Name] = a
	}
	return agents, nil
}

// agentPrices converts the configured price table of an API-mode agent.
func agentPrices(p map[string]config.Price) map[string]agent.Price {
	out := make(map[string]agent.Price, len(p))
	for m, pr := range p {
		out[m] = agent.Price{InputUSDPerMTok: pr.InputUSDPerMTok, OutputUSDPerMTok: pr.OutputUSDPerMTok}
	}
	return out
}

// Serve removes what a crashed process left behind, then serves HTTP on ln and runs the
// workers until ctx ends; it then stops accepting deliveries and waits for the passes in
// progress (a running container is stopped by the cancelled context and its run is redone by
// the next process).
func (s *server) Serve(ctx context.Context, ln net.Listener) error {
	// Recovery first, before the workers run and before the reap: it finds the containers of
	// runs a killed process left (collects the exited ones, fails the vanished ones; the first
	// pass reattaches to those still running) and the reap must keep what recovery keeps.
	if err := s.workers.Recover(ctx); err != nil {
		s.log.Warn("start-up recovery incomplete; the mailboxes' next passes try again", "err", err)
	}
	if err := s.reap(ctx); err != nil {
		s.log.Warn("start-up cleanup incomplete", "err", err)
	}
	// The webhook port answers at once, so that a liveness probe sees the process alive while
	// the rebuild below waits for the forge; until it is done the port is gated (rebuildGate).
	// Whether the store is empty is read before the port takes a delivery: a delivery stored
	// during the rebuild makes a mailbox, and must not make the store look not empty.
	empty, emptyErr := s.store.Empty(ctx)
	if emptyErr != nil {
		return fmt.Errorf("read whether the store is empty: %w", emptyErr)
	}
	gate := newRebuildGate(s.handler)
	httpSrv := httpserve.New(httpLimits(s.cfg.HTTP, s.cfg.MaxBodyBytes, s.cfg.HTTP.MaxConcurrent), gate)
	s.metrics.HTTPStages("webhook", stageStats(httpSrv))
	errc := make(chan error, 2)
	go func() { errc <- httpSrv.Serve(ln) }()
	// An empty store (new, or lost) is rebuilt from the forge before any delivery or pass
	// could start an issue Alfred already works on again.
	if err := s.rebuildIfEmpty(ctx, empty); err != nil {
		gate.stop()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return errors.Join(err, httpSrv.Shutdown(shutdownCtx))
	}
	gate.open()
	if s.cfg.Admin.Listen != "" {
		aln, err := net.Listen("tcp", s.cfg.Admin.Listen)
		if err != nil {
			_ = httpSrv.Close()
			return fmt.Errorf("listen on admin.listen %s: %w", s.cfg.Admin.Listen, err)
		}
		s.log.Info("admin endpoints serving", "listen", aln.Addr().String())
		adminSrv := httpserve.New(httpLimits(s.cfg.HTTP, s.cfg.MaxBodyBytes, adminConcurrent), s.admin)
		s.metrics.HTTPStages("admin", stageStats(adminSrv))
		go func() { errc <- adminSrv.Serve(aln) }()
		defer func() { _ = adminSrv.Close() }()
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.workers.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.recon.Run(ctx) // at once (what happened while Alfred was down), then every interval
	}()
	if s.poller != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.poller.Run(ctx) // at once, then every forge's poll_interval
		}()
	}
	if r := s.retention(); r != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Run(ctx, time.Hour)
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = errors.Join(err, httpSrv.Shutdown(shutdownCtx))
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// rebuildGate is the webhook port's handler while the start-up rebuild runs: GET /healthz
// answers 200 "ok" (the process is alive: a liveness probe keeps it) and GET /readyz 503
// "rebuilding" at once; a delivery (POST /webhooks/...) goes to next at once — store first:
// it is stored and answered 202 whatever the rebuild is doing (Gitea and Forgejo never send a
// delivery again), and applied only after the rebuild, since the workers start after it and
// the rebuild takes over the idle mailbox a delivery made (mailbox.Rebuilds). Every other
// request waits until the gate opens (then goes to next), its client leaves, or the gate
// stops (503 with a Retry-After).
type rebuildGate struct {
	next    http.Handler
	opened  chan struct{} // closed by open
	stopped chan struct{} // closed by stop
}

func newRebuildGate(next http.Handler) *rebuildGate {
	return &rebuildGate{next: next, opened: make(chan struct{}), stopped: make(chan struct{})}
}

// open lets every request through; call it once.
func (g *rebuildGate) open() { close(g.opened) }

// stop answers the waiting requests 503; call it once, when the rebuild ends without opening.
func (g *rebuildGate) stop() { close(g.stopped) }

func (g *rebuildGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-g.opened:
		g.next.ServeHTTP(w, r)
		return
	default:
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/webhooks/") {
		g.next.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/readyz" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "rebuilding the mailboxes from the forge\n")
		return
	}
	select {
	case <-g.opened:
		g.next.ServeHTTP(w, r)
	case <-r.Context().Done():
	case <-g.stopped:
		w.Header().Set("Retry-After", strconv.Itoa(int(rebuildRetry/time.Second)))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "alfred is stopping\n")
	}
}

// adminConcurrent is how many admin requests are handled at once: operators, not forges.
const adminConcurrent = 4

// httpLimits is the server limits of the configuration, with concurrent requests at once.
func httpLimits(h config.HTTP, maxBody int64, concurrent int) httpserve.Limits {
	return httpserve.Limits{ReadHeaderTimeout: h.ReadHeaderTimeout, ReadTimeout: h.ReadTimeout,
		WriteTimeout: h.WriteTimeout, IdleTimeout: h.IdleTimeout, MaxHeaderBytes: h.MaxHeaderBytes,
		MaxConcurrent: concurrent, MaxReaders: h.MaxReaders, MaxBodyBytes: maxBody, BodyMemory: h.MaxBodyMemory}
}

// stageStats reads srv's stages for the metrics.
func stageStats(srv *httpserve.Server) func() metrics.StageStats {
	return func() metrics.StageStats {
		st := srv.Stats()
		return metrics.StageStats{Reading: st.Reading, Waiting: st.Waiting, Handling: st.Handling}
	}
}

// reap removes what a process killed during a run left behind and recovery did not keep
// (runner.Service.ReapLeftovers, which reads the store's view of the mailboxes after listing
// what it might remove: another replica may be working on).
func (s *server) reap(ctx context.Context) error {
	return s.service.ReapLeftovers(ctx, func(ctx context.Context) (runner.Mailboxes, error) {
		leased, err := s.store.LeasedMailboxes(ctx)
		if err != nil {
			return runner.Mailboxes{}, err
		}
		open, err := s.store.OpenMailboxes(ctx)
		if err != nil {
			return runner.Mailboxes{}, err
		}
		live, err := s.store.LiveContainerMailboxes(ctx)
		if err != nil {
			return runner.Mailboxes{}, err
		}
		return runner.Mailboxes{Leased: leased, Open: open, LiveContainers: live}, nil
	})
}

// Close releases the store (and, on SQLite, its process lock).
func (s *server) Close() error { return s.store.Close() }

// ensureDir creates the data directory if needed.
func ensureDir(dir string) error { return os.MkdirAll(filepath.Clean(dir), 0o750) }

// poolOf returns the database settings as the PostgreSQL store's pool sizes.
func poolOf(d config.Database) postgres.Pool {
	return postgres.Pool{MaxOpen: d.MaxOpenConns, MaxIdle: d.MaxIdleConns, Lifetime: d.ConnMaxLifetime,
		IdleTime: d.ConnMaxIdleTime}
}
