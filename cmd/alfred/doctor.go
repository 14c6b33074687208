package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/migrations"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// errBlocked is returned by doctor when a check failed; the checklist says which.
var errBlocked = errors.New("doctor: some checks failed (see above)")

// doctor implements "alfred doctor": it checks the configuration, the database, the Docker
// engine (or, with runner.runtime: kubernetes, the cluster), the agent images and every forge, prints the checklist with a fix per failure, and
// fails when something blocks work; only when nothing does, it prints the webhook URL to
// configure on each forge.
func (a *app) doctor(ctx context.Context, args []string) error {
	fs := a.flagSet("doctor", "[--config alfred.yaml]")
	path := a.configFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fs.Usage()
		return errUsage
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cfg, err := a.loadConfig(*path)
	dc := doctor.Config{ConfigFile: *path, ConfigErr: err}
	if err == nil {
		var closeAll func()
		dc, closeAll = a.doctorConfig(ctx, *path, cfg)
		defer closeAll()
	}
	rep := doctor.Run(ctx, dc)
	for i := range rep.Results {
		rep.Results[i].Detail = a.censor.String(rep.Results[i].Detail)
	}
	if err := rep.Write(a.stdout); err != nil {
		return err
	}
	if rep.Blocking() {
		// No webhook URL yet: a hook set now would deliver to an Alfred that cannot work. A
		// missing hook is itself a failure whose fix names the URL.
		return errBlocked
	}
	fmt.Fprintln(a.stdout)
	for _, f := range cfg.Forges {
		fmt.Fprintf(a.stdout, "Webhook URL to set on %s (%s): %s\n", f.Name, f.Kind,
			doctor.WebhookURL(publicURLOrListen(cfg), f.Name))
	}
	return nil
}

// publicURLOrListen is public_url, else a URL built from the listen address (what a forge on
// this host would call).
func publicURLOrListen(cfg *config.Config) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	host := cfg.Listen
	if len(host) > 0 && host[0] == ':' {
		host = "127.0.0.1" + host
	}
	return "http://" + host
}

// doctorConfig connects what the checks need; the returned function releases it.
func (a *app) doctorConfig(ctx context.Context, path string, cfg *config.Config) (doctor.Config, func()) {
	dc := doctor.Config{ConfigFile: path, PublicURL: cfg.PublicURL}
	var closers []func()
	// The store database_url selects, opened as serve opens it (migrations applied): for the
	// embedded SQLite store this also proves no other process holds it.
	// openErr is its own variable: the closure below must see the store's error, not a later
	// one (a nil st with a nil error would be pinged).
	// SQLite is opened without ever creating it: a doctor run where the data is not (outside
	// Alfred's Pod) says there is no database instead of making an empty one.
	var st *sqlstore.Store
	var openErr error
	if d, path := store.Engine(cfg.DatabaseURL.Reveal(), cfg.DataDir); d == migrations.SQLite {
		dc.SQLite = path
		st, openErr = sqlite.OpenExisting(ctx, path, nil)
		switch {
		case errors.Is(openErr, sqlite.ErrNoDatabase):
			openErr = fmt.Errorf("%w at %s", doctor.ErrNoSQLite, path)
		case errors.Is(openErr, sqlite.ErrLocked):
			openErr = fmt.Errorf("%w: %w", doctor.ErrSQLiteInUse, openErr)
		}
	} else {
		st, openErr = store.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DataDir, poolOf(cfg.Database), nil)
	}
	if openErr != nil {
		st = nil
	} else {
		closers = append(closers, func() { _ = st.Close() })
	}
	dc.Database = func(ctx context.Context) error {
		if st == nil {
			return cmp.Or(openErr, errors.New("the store could not be opened"))
		}
		return st.Ping(ctx)
	}
	agents, err := buildAgents(cfg)
	if err != nil {
		dc.ConfigErr = err
		return dc, func() {}
	}
	// The runtime runner.runtime selects: the Docker engine, or the cluster (its API, RBAC,
	// state claim and a Pod per agent image, doctor_kube.go). The CLI probe runs on it.
	var rt runner.Runtime
	if cfg.Runner.Runtime == config.RuntimeKubernetes {
		var kr *kubernetes.Runtime
		dc.Kubernetes, kr = kubeDoctor(cfg, agents)
		if kr != nil {
			rt = kr
		}
	} else if cli, err := docker.NewClient(); err == nil {
		closers = append(closers, func() { _ = cli.Close() })
		dc.Engine = dockerEngine{cli: cli}
		rt = docker.New(cli)
	} else {
		dc.Engine = dockerEngine{err: err}
	}
	if rt != nil {
		exec, err := runner.NewExecutor(runner.Config{Runtime: rt, Agents: agents,
			DataDir: cfg.DataDir, UID: cfg.Runner.UID, GID: cfg.Runner.GID, Instance: cfg.Runner.InstanceOf(cfg.DataDir)})
		if err == nil {
			dc.Prober = cliProber{svc: runner.NewService(exec, nil, runner.SessionConfig{}, nil), agents: agents}
		}
	}
	for _, ag := range cfg.Agents {
		var phases []string
		for p, name := range cfg.Phases {
			if name == ag.Name {
				phases = append(phases, p)
			}
		}
		slices.Sort(phases)
		da := doctor.Agent{Name: ag.Name, Adapter: ag.Adapter, Image: ag.Image, Phases: phases}
		if sa, ok := agents[ag.Name].(runner.SessionAgent); ok {
			da.VersionCommand = sa.Capabilities().VersionCommand
		} else if ag.Adapter == script.Name {
			da.VersionCommand = []string{"-version"} // its default command needs a phase's input
		}
		if c, ok := agents[ag.Name].(interface{ Check(context.Context) error }); ok {
			da.API = c.Check // API mode: the provider's models endpoint, no tokens
		}
		dc.Agents = append(dc.Agents, da)
	}
	var repos map[string][]string
	if st != nil {
		repos, _ = st.OpenRepositories(ctx) // the database check says why when it cannot
	}
	for _, f := range cfg.Forges {
		client, err := forgeClient(f, nil)
		df := doctor.Forge{Name: f.Name, Kind: f.Kind, BotUser: f.BotUser, Poll: f.Transport.Poll(), NoWebhook: !f.Transport.Webhook()}
		if err != nil {
			df.Client = brokenForge{err}
		} else {
			df.Client = client
		}
		df.Repos = append(df.Repos, f.Repositories...)
		for _, r := range repos[f.Name] {
			if !slices.Contains(df.Repos, r) {
				df.Repos = append(df.Repos, r)
			}
		}
		dc.Forges = append(dc.Forges, df)
	}
	return dc, func() {
		for _, c := range closers {
			c()
		}
	}
}

// doctorForge is what the doctor and the server need of a forge client.
type doctorForge interface {
	forge.Forge
	doctor.ForgeClient
}

// forgeClient builds the API client of f; hc carries each request (nil: the default
// transport), so that the server can count them.
func forgeClient(f config.Forge, hc *http.Client) (doctorForge, error) {
	switch f.Kind {
	case forge.KindGitLab:
		return gitlab.NewClient(gitlab.ClientConfig{BaseURL: f.BaseURL, Token: f.Token.Reveal(), HTTPClient: hc})
	case forge.KindForgejo:
		return forgejo.NewClient(forgejo.ClientConfig{BaseURL: f.BaseURL, Token: f.Token.Reveal(), HTTPClient: hc})
	}
	return nil, fmt.Errorf("forge %s: unknown kind %q", f.Name, f.Kind)
}

// dockerEngine is doctor.Engine on the Docker Engine API.
type dockerEngine struct {
	cli *client.Client
	err error // set when no client could be built
}

func (e dockerEngine) Ping(ctx context.Context) error {
	if e.err != nil {
		return e.err
	}
	_, err := e.cli.Ping(ctx)
	return err
}

func (e dockerEngine) ImageExists(ctx context.Context, image string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, image)
	switch {
	case cerrdefs.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// cliProber is doctor.Prober on the runner: the version command in a disposable container.
type cliProber struct {
	svc    *runner.Service
	agents map[string]runner.Agent
}

func (p cliProber) ProbeCLI(ctx context.Context, a doctor.Agent) (doctor.CLIProbe, error) {
	r, err := p.svc.ProbeCLI(ctx, p.agents[a.Name], a.Image)
	if ve := (*runner.VersionExitError)(nil); errors.As(err, &ve) {
		err = &doctor.ExitError{Code: ve.Code, Output: ve.Stderr} // the image is broken: a failed check
	}
	return doctor.CLIProbe{Version: r.Version, Sessions: r.Sessions, ResumeVerified: r.ResumeVerified}, err
}

// brokenForge answers every check with the error that kept the client from being built.
type brokenForge struct{ err error }

func (b brokenForge) BotUser(context.Context) (forge.User, error) { return forge.User{}, b.err }
func (b brokenForge) Permission(context.Context, string) (forge.Permission, error) {
	return forge.Permission{}, b.err
}
func (b brokenForge) Hooks(context.Context, string) ([]forge.Hook, error) { return nil, b.err }
