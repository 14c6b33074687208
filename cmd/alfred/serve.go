package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // PostgreSQL driver

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/store/postgres"
	"github.com/alfred-bot/alfred/migrations"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent"
	"github.com/alfred-bot/alfred/runner/docker"
	gitrepo "github.com/alfred-bot/alfred/runner/git"
	"github.com/alfred-bot/alfred/runner/phase"
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
	err = srv.Serve(ctx, ln)
	log.Info("alfred stopped", "err", err)
	return err
}

// server is a wired Alfred: HTTP edge, workers, runner. Tests build one with newServer and
// point it at stand-in forges.
type server struct {
	cfg     *config.Config
	log     *slog.Logger
	db      *sqlx.DB
	store   *postgres.Store
	workers *mailbox.Workers
	recon   *mailbox.Reconciler
	service *runner.Service
	handler http.Handler
}

// newServer connects to the database, applies the migrations and wires every component.
func newServer(ctx context.Context, cfg *config.Config, log *slog.Logger) (*server, error) {
	db, err := sqlx.Open("postgres", cfg.DatabaseURL.Reveal())
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to database (is PostgreSQL running? `make deps` starts it): %w", err)
	}
	if err := migrations.Apply(ctx, db.DB); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := ensureDir(cfg.DataDir); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create data_dir: %w", err)
	}
	s := &server{cfg: cfg, log: log, db: db, store: postgres.New(db, nil).WithLogger(log)}
	if err := s.wire(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (s *server) wire(ctx context.Context) error {
	cfg := s.cfg
	redact := cfg.Censor().String

	sources := map[string]webhook.Source{}
	bots := map[string]mailbox.Bot{}
	gits := map[string]*gitrepo.Manager{}
	for _, f := range cfg.Forges {
		var (
			src    webhook.Source
			client forge.Forge
			err    error
		)
		switch f.Kind {
		case forge.KindGitLab:
			src, err = gitlab.NewSource(gitlab.SourceConfig{Tokens: []string{f.WebhookSecret.Reveal()}})
			if err == nil {
				client, err = gitlab.NewClient(gitlab.ClientConfig{BaseURL: f.BaseURL, Token: f.Token.Reveal()})
			}
		case forge.KindForgejo:
			src, err = forgejo.NewSource(forgejo.SourceConfig{Secrets: []string{f.WebhookSecret.Reveal()}})
			if err == nil {
				client, err = forgejo.NewClient(forgejo.ClientConfig{BaseURL: f.BaseURL, Token: f.Token.Reveal()})
			}
		default:
			err = fmt.Errorf("unknown kind %q", f.Kind)
		}
		if err != nil {
			return fmt.Errorf("forge %s: %w", f.Name, err)
		}
		sources[f.Name] = src
		bots[f.Name] = mailbox.Bot{Forge: client, Login: f.BotUser, OtherBots: f.OtherBots}
		g, err := gitrepo.New(gitrepo.Config{DataDir: cfg.DataDir, Username: f.GitUser, Token: f.Token.Reveal(),
			AuthorName: cfg.Lifecycle.GitName, AuthorEmail: cfg.Lifecycle.GitEmail,
			UID: cfg.Runner.UID, GID: cfg.Runner.GID})
		if err != nil {
			return fmt.Errorf("forge %s: git: %w", f.Name, err)
		}
		gits[f.Name] = g
	}

	agents, err := buildAgents(cfg)
	if err != nil {
		return err
	}
	bindings := map[phase.Phase]string{}
	for _, p := range []phase.Phase{phase.Analysis, phase.Development, phase.CIFix,
		phase.ReviewFix, phase.ConflictResolution, phase.Answer, phase.Review} {
		if name := cfg.Phases.Agent(string(p)); name != "" {
			bindings[p] = name
		}
	}

	cli, err := docker.NewClient()
	if err != nil {
		return err
	}
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("reach the Docker engine (is dockerd running? `make deps` starts it): %w", err)
	}
	exec, err := runner.NewExecutor(runner.Config{
		Runtime: docker.New(cli), Agents: agents, Bindings: bindings,
		DataDir: cfg.DataDir, UID: cfg.Runner.UID, GID: cfg.Runner.GID,
		Limits: runner.Limits{MemoryBytes: cfg.Runner.MemoryBytes, NanoCPUs: int64(cfg.Runner.CPUs * 1e9),
			PIDs: cfg.Runner.PIDs},
		Timeout: cfg.Runner.Timeout, HostNetwork: cfg.Runner.HostNetwork, Redact: redact,
		MaxOutputBytes: int(cfg.Runner.MaxOutputBytes),
		ContainerLog:   s.store, // every run container is recorded, so a restart finds it again
		Instance:       instanceID(cfg.DataDir),
	})
	if err != nil {
		return err
	}
	s.service = runner.NewService(exec, gits, runner.SessionConfig{Store: s.store, Dir: filepath.Join(cfg.DataDir, "sessions"), UID: cfg.Runner.UID, GID: cfg.Runner.GID}, s.log)

	machine := mailbox.NewMachine(mailbox.Config{
		Labels:           cfg.Labels,
		QuestionDeadline: cfg.Lifecycle.QuestionDeadline, CIWait: cfg.Lifecycle.CIWait,
		CIPoll: cfg.Lifecycle.CIPoll, SessionResume: cfg.Sessions.ResumeEnabled, Redact: redact, CIFixAttempts: cfg.Lifecycle.CIFixAttempts, BranchPrefix: cfg.Lifecycle.BranchPrefix,
		PoisonAttempts: cfg.Workers.PoisonAttempts,
	}, s.store, bots, s.service, nil, s.log)
	s.workers = mailbox.NewWorkers(mailbox.WorkerConfig{Count: cfg.Workers.Count, LeaseTTL: cfg.Workers.LeaseTTL,
		Poll: cfg.Workers.PollInterval, Runs: cfg.Workers.Runs, RunsPerProject: cfg.Workers.RunsPerProject}, s.store, machine, s.log)
	s.recon = mailbox.NewReconciler(mailbox.ReconcilerConfig{Interval: cfg.Workers.ReconcileInterval, Batch: cfg.Workers.ReconcileBatch},
		s.store, mailbox.WakingInbox{Inbox: s.store, Workers: s.workers}, bots, nil, s.log)

	receiver, err := webhook.NewReceiver(webhook.ReceiverConfig{
		Sources: sources, Inbox: mailbox.WakingInbox{Inbox: s.store, Workers: s.workers},
		Ready: s.store.Ping, MaxBodyBytes: cfg.MaxBodyBytes, Logger: s.log,
	})
	if err != nil {
		return err
	}
	r := chi.NewRouter()
	r.Method(http.MethodGet, "/mailboxes/{id}/session",
		admin.SessionHandler(s.store, func(r *http.Request) string { return chi.URLParam(r, "id") }))
	r.Mount("/", receiver)
	s.handler = r
	return nil
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
// workers until ctx ends; it then stops accepting deliveries and waits for the steps in
// progress (a running container is stopped by the cancelled context and its run is redone by
// the next process).
func (s *server) Serve(ctx context.Context, ln net.Listener) error {
	// Recovery first, before the workers run and before the reap: it finds the containers of
	// runs a killed process left (collects the exited ones, fails the vanished ones; the first
	// Step reattaches to those still running) and the reap must keep what recovery keeps.
	if err := s.workers.Recover(ctx); err != nil {
		s.log.Warn("start-up recovery incomplete; the mailboxes' next steps try again", "err", err)
	}
	if err := s.reap(ctx); err != nil {
		s.log.Warn("start-up cleanup incomplete", "err", err)
	}
	httpSrv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()

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

// instanceID names this installation on a shared Docker daemon: the first 12 hex digits of the
// SHA-256 of the absolute data directory. Replicas sharing a data directory (and a database)
// are one installation; another installation's containers are never reaped.
func instanceID(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// Close releases the database.
func (s *server) Close() error { return s.db.Close() }

// ensureDir creates the data directory if needed.
func ensureDir(dir string) error { return os.MkdirAll(filepath.Clean(dir), 0o750) }
