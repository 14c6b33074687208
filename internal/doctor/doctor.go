// Package doctor checks that an installation can work before it serves: the configuration,
// the database, the Docker engine (or, with runner.runtime: kubernetes, the cluster: the API,
// each verb the runtime needs, the state claim, a Pod of each agent image run to completion),
// each agent image and CLI, and on each forge the bot's token, its permission on the
// repositories and their webhooks. Each check says what is wrong and how to fix it;
// Report.Blocking tells whether anything stops Alfred from working. Every dependency is a small
// interface, so the checks run against the real services in "alfred doctor" and against
// stand-ins in tests.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Status is a check's verdict.
type Status string

// The verdicts. Only Fail blocks work.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Result is one line of the checklist.
type Result struct {
	// Check names what was checked ("forge gitea: token").
	Check string
	Status
	// Detail says what was found.
	Detail string
	// Fix says what to do when Status is Warn or Fail.
	Fix string
}

// Report is the checklist, in the order the checks ran.
type Report struct {
	Results []Result

	quick, long time.Duration // the checks' deadlines (Config.CheckTimeout, RunTimeout)
}

// Defaults of Config's deadlines.
const (
	// DefaultCheckTimeout bounds a check that asks a service (the database, the engine, the
	// cluster's API, a provider, the forge).
	DefaultCheckTimeout = 30 * time.Second
	// DefaultRunTimeout bounds a check that runs an agent image (a container or a Pod of it):
	// one CLI's --version took 81 s on a loaded machine.
	DefaultRunTimeout = 4 * time.Minute
)

// bounded runs probe with a context that ends after d, and waits for it at most d (a
// dependency that ignores its context does not hold the checklist): past d it returns an
// error saying no answer came. A panic in probe is its error.
func bounded[T any](ctx context.Context, d time.Duration, probe func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := guardedValue(func() (T, error) { return probe(cctx) })
		done <- result{v, err}
	}()
	var zero T
	select {
	case x := <-done:
		if x.err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return zero, fmt.Errorf("no answer within %s: %w", d, x.err)
		}
		return x.v, x.err
	case <-cctx.Done():
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		return zero, fmt.Errorf("no answer within %s", d)
	}
}

// boundedErr is bounded for a probe without a value.
func boundedErr(ctx context.Context, d time.Duration, probe func(context.Context) error) error {
	_, err := bounded(ctx, d, func(ctx context.Context) (struct{}, error) { return struct{}{}, probe(ctx) })
	return err
}

// Blocking reports whether a check failed: Alfred cannot work until it is fixed.
func (r *Report) Blocking() bool {
	for _, x := range r.Results {
		if x.Status == Fail {
			return true
		}
	}
	return false
}

// Failed returns the failed checks.
func (r *Report) Failed() []Result {
	var out []Result
	for _, x := range r.Results {
		if x.Status == Fail {
			out = append(out, x)
		}
	}
	return out
}

func (r *Report) add(check string, s Status, detail, fix string) {
	r.Results = append(r.Results, Result{Check: check, Status: s, Detail: detail, Fix: fix})
}

// Write prints the checklist, one check a line with its fix below it, and a last line with
// the verdict.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	fails, warns := 0, 0
	for _, x := range r.Results {
		fmt.Fprintf(&b, "%-6s %s: %s\n", "["+string(x.Status)+"]", x.Check, x.Detail)
		if x.Fix != "" && (x.Status == Fail || x.Status == Warn) {
			for i, line := range strings.Split(x.Fix, "\n") {
				lead := "       fix: "
				if i > 0 {
					lead = "            "
				}
				b.WriteString(lead + line + "\n")
			}
		}
		switch x.Status {
		case Fail:
			fails++
		case Warn:
			warns++
		}
	}
	switch {
	case fails > 0:
		fmt.Fprintf(&b, "%d check(s) failed, %d warning(s): Alfred cannot work until the failures are fixed.\n", fails, warns)
	case warns > 0:
		fmt.Fprintf(&b, "All blocking checks passed, %d warning(s).\n", warns)
	default:
		b.WriteString("All checks passed.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Engine is the Docker engine as the checks need it.
type Engine interface {
	// Ping reaches the engine.
	Ping(ctx context.Context) error
	// ImageExists reports whether image is present locally (Alfred pulls nothing at run time
	// when no registry is reachable).
	ImageExists(ctx context.Context, image string) (bool, error)
}

// Agent is one configured agent.
type Agent struct {
	// Name is the agent's name in the configuration; Adapter its runner adapter; Image the
	// container image it runs in.
	Name, Adapter, Image string
	// Phases are the phases bound to it; an agent bound to none is only warned about.
	Phases []string
	// VersionCommand is the adapter's version command (the arguments of the image's
	// entrypoint), run by the Kubernetes check's Pod; empty runs the image's default command.
	VersionCommand []string
	// API checks an API-mode agent against its provider without spending tokens (the key is
	// accepted, the model exists); nil for an agent that runs in a container. An API-mode
	// agent has no image and needs no Docker engine.
	API func(ctx context.Context) error
}

// CLIProbe is what a prober found in an agent image.
type CLIProbe struct {
	// Version is the CLI version detected in the image ("2.1.332").
	Version string
	// Sessions is true when the adapter resumes sessions; ResumeVerified when Version is one
	// the adapter is verified to resume with.
	Sessions, ResumeVerified bool
}

// Prober detects an agent CLI's version in its image (a disposable container running the
// adapter's version command).
type Prober interface {
	ProbeCLI(ctx context.Context, a Agent) (CLIProbe, error)
}

// ForgeClient is the forge API the checks call; webhook/forgejo.Client and
// webhook/gitlab.Client implement it.
type ForgeClient interface {
	// BotUser returns the token's account.
	BotUser(ctx context.Context) (forge.User, error)
	// Permission returns the token account's own access to repo.
	Permission(ctx context.Context, repo string) (forge.Permission, error)
	// Hooks lists repo's webhooks.
	Hooks(ctx context.Context, repo string) ([]forge.Hook, error)
}

// Forge is one configured forge.
type Forge struct {
	// Name is the configured forge name (the {name} of /webhooks/{name}).
	Name string
	Kind forge.Kind
	// BotUser is the configured bot_user the token must belong to.
	BotUser string
	// Repos are the repositories to check: those with a mailbox and those listed in the
	// configuration.
	Repos  []string
	Client ForgeClient
	// Poll and NoWebhook are the forge's transport (forges[].transport): polled, and whether
	// its webhooks are off (then no hook is checked). A polled forge's client must be a
	// forge.Poller.
	Poll, NoWebhook bool
}

// Config is what Run checks.
type Config struct {
	// ConfigFile names the configuration file, for the messages.
	ConfigFile string
	// ConfigErr is the error of loading and validating the configuration; when set, Run
	// reports it and checks nothing else.
	ConfigErr error
	// PublicURL is Alfred's external URL (public_url); the webhook URL the forges must call is
	// PublicURL + "/webhooks/" + forge name. Empty: the webhooks' URLs are checked only for
	// their path, with a warning.
	PublicURL string
	// Database checks the database (reachable, migrations applicable); nil skips it.
	Database func(ctx context.Context) error
	// SQLite is the database file when the store is the embedded SQLite ("" for PostgreSQL):
	// the database check's fix is then about that file, not about a server.
	SQLite string
	// CheckTimeout bounds each check that asks a service (DefaultCheckTimeout if zero);
	// RunTimeout each check that runs an agent image (DefaultRunTimeout if zero). A check past
	// its deadline fails saying no answer came.
	CheckTimeout, RunTimeout time.Duration
	// Engine is the Docker engine; nil skips the engine and image checks.
	Engine Engine
	// Kubernetes, when set (runner.runtime: kubernetes), is checked instead of Engine: the
	// API, the runtime's permissions, the state claim, and a Pod of each agent's image.
	Kubernetes *Kubernetes
	Agents     []Agent
	// Prober detects CLI versions; nil skips that check.
	Prober Prober
	Forges []Forge
}

// WebhookURL is the URL a forge's webhook must point at.
func WebhookURL(publicURL, forgeName string) string {
	return strings.TrimRight(publicURL, "/") + "/webhooks/" + forgeName
}

// Run runs every check and returns the checklist. It never fails itself: what it cannot
// check is a Fail or a Skip in the report.
func Run(ctx context.Context, cfg Config) *Report {
	r := &Report{quick: cfg.CheckTimeout, long: cfg.RunTimeout}
	if r.quick <= 0 {
		r.quick = DefaultCheckTimeout
	}
	if r.long <= 0 {
		r.long = DefaultRunTimeout
	}
	if cfg.ConfigErr != nil {
		r.add("configuration", Fail, cfg.ConfigErr.Error(),
			"correct "+cmpOr(cfg.ConfigFile, "the configuration")+" (deploy/alfred.example.yaml documents every setting), then run `alfred config check`")
		return r
	}
	r.add("configuration", OK, cmpOr(cfg.ConfigFile, "configuration")+" is valid", "")
	if cfg.PublicURL == "" {
		r.add("public_url", Warn, "not set: the webhooks' URLs can only be checked for their path",
			"set public_url to the URL the forges reach Alfred at (e.g. http://alfred.example:8080)")
	}
	checkDatabase(ctx, r, cfg.Database, cfg.SQLite)
	if cfg.Kubernetes != nil {
		checkKubernetes(ctx, r, cfg)
	} else {
		checkEngine(ctx, r, cfg)
	}
	for _, a := range cfg.Agents {
		if a.API != nil {
			checkAPI(ctx, r, a)
		}
	}
	for _, f := range cfg.Forges {
		checkForge(ctx, r, cfg.PublicURL, f)
	}
	return r
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ErrNoSQLite is wrapped by a Config.Database error when the SQLite file does not exist (the
// doctor never creates it): a warning, since a first start has none yet.
var ErrNoSQLite = errors.New("no SQLite database")

// ErrSQLiteInUse is wrapped by a Config.Database error when another process holds the SQLite
// database.
var ErrSQLiteInUse = errors.New("the SQLite database is in use by another process")

func checkDatabase(ctx context.Context, r *Report, db func(context.Context) error, sqlite string) {
	if db == nil {
		r.add("database", Skip, "not checked", "")
		return
	}
	if err := boundedErr(ctx, r.quick, db); err != nil {
		s := Fail
		if errors.Is(err, ErrNoSQLite) {
			// A first start has none yet (`alfred serve` creates it): a warning, which says
			// so, rather than an empty database made here or a failure that stops `make run`.
			s = Warn
		}
		r.add("database", s, err.Error(), databaseFix(err, sqlite))
		return
	}
	if sqlite != "" {
		r.add("database", OK, "SQLite "+sqlite+" opens", "")
		return
	}
	r.add("database", OK, "reachable", "")
}

// databaseFix is the fix of a failed database check, for the store in use.
func databaseFix(err error, sqlite string) string {
	switch {
	case sqlite == "":
		return "start PostgreSQL (`make deps` does) and check database_url (or database_url_file)"
	case errors.Is(err, ErrNoSQLite):
		return "nothing to do on a first start: `alfred serve` (or `alfred migrate`) creates " + sqlite + "; if it should exist already, check data_dir and database_url (sqlite:PATH) and that this runs where the data is (inside Alfred's Pod or container, or with its data_dir mounted)"
	case errors.Is(err, ErrSQLiteInUse):
		return "another process holds " + sqlite + " (a SQLite database serves one process): run the doctor while Alfred is stopped, or inside its Pod or container; replicas need PostgreSQL"
	default:
		return "check " + sqlite + ": its directory exists and this user may read and write it and its -wal and -shm files"
	}
}

// guarded runs a check's probe, a panic in it returned as its error: the checklist is printed
// whatever a dependency does.
func guarded(probe func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the check failed unexpectedly: %v", p)
		}
	}()
	return probe()
}

func checkEngine(ctx context.Context, r *Report, cfg Config) {
	if cfg.Engine == nil {
		r.add("docker", Skip, "not checked", "")
		return
	}
	if err := boundedErr(ctx, r.quick, cfg.Engine.Ping); err != nil {
		r.add("docker", Fail, "engine unreachable: "+err.Error(),
			"start dockerd (`make deps` does) and let this user reach /var/run/docker.sock (or set DOCKER_HOST)")
		return
	}
	r.add("docker", OK, "engine reachable", "")
	for _, a := range cfg.Agents {
		if a.API == nil {
			checkAgent(ctx, r, cfg, a)
		}
	}
}

// checkAPI asks an API-mode agent's provider whether its key and model are good.
func checkAPI(ctx context.Context, r *Report, a Agent) {
	name := "agent " + a.Name + ": API"
	if err := boundedErr(ctx, r.quick, a.API); err != nil {
		s := Fail
		if len(a.Phases) == 0 {
			s = Warn
		}
		r.add(name, s, err.Error(), "check the agent's api_key_file, model and base_url ("+a.Adapter+")")
		return
	}
	r.add(name, OK, a.Adapter+": key accepted, model known", "")
}

func checkAgent(ctx context.Context, r *Report, cfg Config, a Agent) {
	name := "agent " + a.Name
	ok, err := bounded(ctx, r.quick, func(ctx context.Context) (bool, error) { return cfg.Engine.ImageExists(ctx, a.Image) })
	switch {
	case err != nil:
		r.add(name+": image", Fail, "cannot inspect "+a.Image+": "+err.Error(), "check the Docker engine")
		return
	case !ok:
		s := Fail
		if len(a.Phases) == 0 {
			s = Warn
		}
		r.add(name+": image", s, a.Image+" is missing", imageFix(a))
		return
	}
	r.add(name+": image", OK, a.Image+" present", "")
	checkCLI(ctx, r, cfg, a)
}

// checkCLI detects the agent's CLI version in its image (cfg.Prober), when it has a CLI.
func checkCLI(ctx context.Context, r *Report, cfg Config, a Agent) {
	name := "agent " + a.Name
	if cfg.Prober == nil || a.Adapter == "script" {
		return
	}
	p, err := bounded(ctx, r.long, func(ctx context.Context) (CLIProbe, error) { return cfg.Prober.ProbeCLI(ctx, a) })
	var exit *ExitError
	switch {
	case errors.As(err, &exit):
		r.add(name+": CLI", Fail, a.Image+" does not run the "+a.Adapter+" CLI: "+err.Error(),
			"build the image again (deploy/agents/Dockerfile --target "+a.Adapter+") and run its version command by hand to see why it fails")
	case err != nil:
		r.add(name+": CLI", Warn, "version not detected ("+err.Error()+"): sessions start fresh on every run",
			"check that "+a.Image+" runs the "+a.Adapter+" CLI (deploy/agents/Dockerfile --target "+a.Adapter+")")
	case !p.Sessions:
		r.add(name+": CLI", OK, a.Adapter+" "+p.Version+" (the adapter does not resume sessions)", "")
	case !p.ResumeVerified:
		r.add(name+": CLI", Warn, a.Adapter+" "+p.Version+" is not a version verified to resume sessions: every run starts fresh",
			"build the image at a verified version (deploy/agents/Dockerfile pins them)")
	default:
		r.add(name+": CLI", OK, a.Adapter+" "+p.Version+", verified to resume sessions", "")
	}
}

// ExitError is a Prober's or a Cluster's error when the image's command ran and exited
// non-zero: the image is there but broken, which fails its check.
type ExitError struct {
	// Code is the exit code; Output the end of what the command printed, if known.
	Code   int
	Output string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("its command exited %d", e.Code)
	if out := strings.TrimSpace(e.Output); out != "" {
		msg += ": " + out
	}
	return msg
}

func imageFix(a Agent) string {
	if a.Adapter == "script" {
		return "make script-agent-image (builds alfred/script-agent:dev offline), or set the agent's image"
	}
	return fmt.Sprintf("docker build -f deploy/agents/Dockerfile --target %s -t %s .", a.Adapter, a.Image)
}
