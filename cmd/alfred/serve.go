package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/metrics"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/store"
	"github.com/alfred-bot/alfred/mailbox/store/sqlstore"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/gitrepo"
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
	service *runner.Service
	handler http.Handler
	metrics *metrics.Metrics
}

// newServer opens the store database_url selects (the embedded SQLite database in data_dir
// when empty), applies the migrations and wires every component.
func newServer(ctx context.Context, cfg *config.Config, log *slog.Logger) (*server, error) {
	if err := ensureDir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("create data_dir: %w", err)
	}
	st, err := store.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DataDir, nil)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, log: log, store: st, metrics: newMetrics(st.Gauges)}
	if err := s.wire(ctx); err != nil {
		return nil, errors.Join(err, st.Close())
	}
	return s, nil
}

// wire builds the components from the configuration and connects them: the forges, the
// runner service, the mailbox machine and workers, and the HTTP handler.
func (s *server) wire(ctx context.Context) error {
	forges, err := buildForges(s.cfg, s.metrics)
	if err != nil {
		return err
	}
	if s.service, err = s.buildService(ctx, forges.gits); err != nil {
		return err
	}
	cfg := s.cfg
	machine := mailbox.NewMachine(mailbox.Config{
		Labels:           cfg.Labels,
		QuestionDeadline: cfg.Lifecycle.QuestionDeadline, CIWait: cfg.Lifecycle.CIWait,
		CIPoll: cfg.Lifecycle.CIPoll, Redact: cfg.Censor().String,
		CIFixAttempts: cfg.Lifecycle.CIFixAttempts, BranchPrefix: cfg.Lifecycle.BranchPrefix,
		SessionResume: func(repo string) bool { return cfg.For(repo).SessionResume },
		Settings:      func(repo string) mailbox.Settings { return scopedSettings(cfg.For(repo)) },
		Usage:         s.store,
	}, s.store, forges.bots, s.metrics.InstrumentJobs(s.service), nil, s.log)
	s.workers = mailbox.NewWorkers(mailbox.WorkerConfig{Count: cfg.Workers.Count, LeaseTTL: cfg.Workers.LeaseTTL,
		Poll: cfg.Workers.PollInterval}, s.store, machine, s.log)
	s.handler, err = s.buildHandler(forges.sources)
	return err
}

// forges holds, per configured forge name, its webhook source, its bot (API client and logins)
// and its git manager.
type forges struct {
	sources map[string]webhook.Source
	bots    map[string]mailbox.Bot
	gits    map[string]*gitrepo.Manager
}

// buildForges builds the webhook source, API client and git manager of every configured forge;
// every API call is counted in m (alfred_forge_api_requests_total). An error names the forge.
func buildForges(cfg *config.Config, m *metrics.Metrics) (forges, error) {
	fs := forges{sources: map[string]webhook.Source{}, bots: map[string]mailbox.Bot{},
		gits: map[string]*gitrepo.Manager{}}
	for _, f := range cfg.Forges {
		src, client, err := newForge(f, &http.Client{Transport: m.Transport(f.Name, nil)})
		if err != nil {
			return forges{}, fmt.Errorf("forge %s: %w", f.Name, err)
		}
		g, err := gitrepo.New(gitrepo.Config{DataDir: cfg.DataDir, Username: f.GitUser, Token: f.Token.Reveal(),
			AuthorName: cfg.Lifecycle.GitName, AuthorEmail: cfg.Lifecycle.GitEmail,
			UID: cfg.Runner.UID, GID: cfg.Runner.GID})
		if err != nil {
			return forges{}, fmt.Errorf("forge %s: git: %w", f.Name, err)
		}
		fs.sources[f.Name] = src
		fs.bots[f.Name] = mailbox.Bot{Forge: client, Login: f.BotUser, OtherBots: f.OtherBots}
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
	switch f.Kind {
	case forge.KindGitLab:
		src, err = gitlab.NewSource(gitlab.SourceConfig{Tokens: []string{f.WebhookSecret.Reveal()}})
	case forge.KindForgejo:
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

// buildService connects to the Docker engine and builds the runner service: the executor with
// the configured agents, limits and container log, the git managers and the session store.
func (s *server) buildService(ctx context.Context, gits map[string]*gitrepo.Manager) (*runner.Service, error) {
	cfg := s.cfg
	agents, err := buildAgents(cfg)
	if err != nil {
		return nil, err
	}
	cli, err := docker.NewClient()
	if err != nil {
		return nil, err
	}
	if _, err := cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("reach the Docker engine (is dockerd running? `make deps` starts it): %w", err)
	}
	exec, err := runner.NewExecutor(runner.Config{
		Runtime: docker.New(cli), Agents: agents, Bindings: cfg.Phases.Bindings(),
		DataDir: cfg.DataDir, UID: cfg.Runner.UID, GID: cfg.Runner.GID,
		Limits: runner.Limits{MemoryBytes: cfg.Runner.MemoryBytes, NanoCPUs: int64(cfg.Runner.CPUs * 1e9),
			PIDs: cfg.Runner.PIDs},
		Timeout: cfg.Runner.Timeout, HostNetwork: cfg.Runner.HostNetwork, Redact: cfg.Censor().String,
		MaxOutputBytes: int(cfg.Runner.MaxOutputBytes),
		ContainerLog:   s.store, // every run container is recorded, so a restart finds it again
		Instance:       runner.InstanceID(cfg.DataDir),
	})
	if err != nil {
		return nil, err
	}
	return runner.NewService(exec, gits, runner.SessionConfig{Store: s.store, Dir: filepath.Join(cfg.DataDir, "sessions"),
		UID: cfg.Runner.UID, GID: cfg.Runner.GID}, s.log), nil
}

// buildHandler routes the session endpoint, the metrics and the pages (opsRoutes) and, for
// every other path, the webhook receiver, which stores each delivery and wakes the workers.
func (s *server) buildHandler(sources map[string]webhook.Source) (http.Handler, error) {
	receiver, err := webhook.NewReceiver(webhook.ReceiverConfig{
		Sources: sources, Inbox: mailbox.WakingInbox{Inbox: s.store, Workers: s.workers},
		Ready: s.store.Ping, MaxBodyBytes: s.cfg.MaxBodyBytes, Logger: s.log,
	})
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Method(http.MethodGet, "/mailboxes/{id}/session",
		admin.SessionHandler(s.store, func(r *http.Request) string { return chi.URLParam(r, "id") }))
	if err := s.opsRoutes(r, s.store); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	r.Mount("/", s.metrics.DeliveryMiddleware(names, receiver))
	return r, nil
}

// buildAgents builds the configured agent adapters by name. An adapter that cannot be built
// (an unknown kind, an unreadable or invalid script, a missing API key) is an error naming the
// agent.
func buildAgents(cfg *config.Config) (map[string]runner.Agent, error) {
	agents := map[string]runner.Agent{}
	for _, ag := range cfg.Agents {
		a, err := agent.New(ag.Adapter, agent.Config{Image: ag.Image, Model: ag.Model, APIKey: ag.APIKey.Reveal(),
			BaseURL: ag.BaseURL, APIKeyEnv: ag.APIKeyEnv, Script: ag.Script})
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ag.Name, err)
		}
		agents[ag.Name] = a
	}
	return agents, nil
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
	httpSrv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.workers.Run(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.retention().Run(ctx, time.Hour)
	}()
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

// reap removes what a process killed during a run left behind and recovery did not keep
// (runner.Service.ReapLeftovers), from the store's view of the mailboxes.
func (s *server) reap(ctx context.Context) error {
	leased, err := s.store.LeasedMailboxes(ctx)
	if err != nil {
		return err
	}
	open, err := s.store.OpenMailboxes(ctx)
	if err != nil {
		return err
	}
	live, err := s.store.LiveExecutorMailboxes(ctx)
	if err != nil {
		return err
	}
	return s.service.ReapLeftovers(ctx, runner.Mailboxes{Leased: leased, Open: open, LiveContainers: live})
}

// Close releases the store (and, on SQLite, its process lock).
func (s *server) Close() error { return s.store.Close() }

// ensureDir creates the data directory if needed.
func ensureDir(dir string) error { return os.MkdirAll(filepath.Clean(dir), 0o750) }
