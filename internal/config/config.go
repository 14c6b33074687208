package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/alfred-bot/alfred/internal/censor"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// DefaultPath is the configuration file Load reads when given an empty path.
const DefaultPath = "alfred.yaml"

// Config is the whole configuration of one Alfred process. Load builds it; the zero value is
// not usable, start from Default when building one in code and call Validate.
type Config struct {
	// Listen is the HTTP listen address (":8080").
	Listen string `yaml:"listen" env:"LISTEN"`
	// PublicURL is the optional external URL of this instance, used for links.
	PublicURL string `yaml:"public_url" env:"PUBLIC_URL"`
	// DatabaseURL is the PostgreSQL connection string (URL or key=value DSN). It is a secret
	// because it may hold a password.
	DatabaseURL Secret `yaml:"database_url" env:"-"`
	// DatabaseURLFile is the file DatabaseURL was read from, if any.
	DatabaseURLFile string `yaml:"database_url_file,omitempty" env:"-"`
	// DataDir holds git mirrors, worktrees and run directories.
	DataDir string `yaml:"data_dir" env:"DATA_DIR"`
	// MaxBodyBytes caps the size of a webhook body.
	MaxBodyBytes int64 `yaml:"max_body_bytes" env:"MAX_BODY_BYTES"`

	// Forges are the GitLab and Forgejo servers that send webhooks.
	Forges []Forge `yaml:"forges" env:"-"`
	// Labels are the issue label names that carry the state; empty names take
	// mailbox.DefaultLabels.
	Labels mailbox.Labels `yaml:"labels" envPrefix:"LABELS_"`
	// Lifecycle tunes the issue life cycle.
	Lifecycle Lifecycle `yaml:"lifecycle" envPrefix:"LIFECYCLE_"`
	// Workers tunes the mailbox workers.
	Workers Workers `yaml:"workers" envPrefix:"WORKERS_"`
	// Runner limits the agent containers.
	Runner Runner `yaml:"runner" envPrefix:"RUNNER_"`
	// Agents are the coding-agent configurations that phases can use.
	Agents []Agent `yaml:"agents" env:"-"`
	// Phases maps a phase name to an agent name; see Phases.
	Phases Phases `yaml:"phases" env:"-"`
	// Sessions controls the one-agent-session-per-issue behaviour.
	Sessions Sessions `yaml:"sessions" envPrefix:"SESSIONS_"`
}

// Sessions controls whether a mailbox's runs continue one agent session (spec/sessions.md).
type Sessions struct {
	// AgentSessionResume turns resumable sessions on (default true). Off means no session name,
	// no session mount and no lookup: every run starts fresh.
	AgentSessionResume *bool `yaml:"agent_session_resume" env:"AGENT_SESSION_RESUME"`
	// Overrides set AgentSessionResume per organization ("acme") or per project
	// ("acme/shop", GitLab: the full path). The most specific entry wins.
	Overrides map[string]bool `yaml:"overrides" env:"-"`
}

// ResumeEnabled reports whether sessions resume for repo ("owner/name" or a GitLab path
// "group/sub/name"): the project's override, else the closest group's, else the default.
func (s Sessions) ResumeEnabled(repo string) bool {
	for p := repo; p != ""; {
		if v, ok := s.Overrides[p]; ok {
			return v
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return s.AgentSessionResume == nil || *s.AgentSessionResume
}

// Forge is one configured forge server.
type Forge struct {
	// Name identifies the forge: it is the {name} of POST /webhooks/{name} and
	// forge.IssueRef.Forge. Lower-case letters, digits, '_' and '-'.
	Name string `yaml:"name"`
	// Kind is forge.KindGitLab or forge.KindForgejo (a Gitea server works as Forgejo).
	Kind forge.Kind `yaml:"kind"`
	// BaseURL is the absolute http(s) URL of the server, without a trailing slash.
	BaseURL string `yaml:"base_url"`
	// Token is the bot account's API token.
	Token Secret `yaml:"token"`
	// TokenFile is the file Token was read from, if any.
	TokenFile string `yaml:"token_file,omitempty"`
	// WebhookSecret is the shared secret: the HMAC key on Forgejo, the X-Gitlab-Token on GitLab.
	WebhookSecret Secret `yaml:"webhook_secret"`
	// WebhookSecretFile is the file WebhookSecret was read from, if any.
	WebhookSecretFile string `yaml:"webhook_secret_file,omitempty"`
	// BotUser is the bot's own user name; its own events are dropped.
	BotUser string `yaml:"bot_user"`
	// OtherBots are user names whose mentions and events never start work.
	OtherBots []string `yaml:"other_bots"`
	// GitUser is the user name for git basic auth over HTTPS (the password is Token).
	// Defaults to "oauth2" on GitLab and to BotUser on Forgejo.
	GitUser string `yaml:"git_user"`
}

// Lifecycle tunes the issue life cycle.
type Lifecycle struct {
	// QuestionDeadline is how long a question waits before its default answer applies.
	QuestionDeadline time.Duration `yaml:"question_deadline" env:"QUESTION_DEADLINE"`
	// CIWait is how long to wait for a pipeline to appear.
	CIWait time.Duration `yaml:"ci_wait" env:"CI_WAIT"`
	// CIPoll is how often the CI state of the merge request's head commit is read while in CI.
	// Forgejo sends no webhook for commit statuses, so this is how Forgejo CI is seen.
	CIPoll time.Duration `yaml:"ci_poll" env:"CI_POLL"`
	// CIFixAttempts is how many ci_fix phases run before giving up; 0 disables them.
	CIFixAttempts int `yaml:"ci_fix_attempts" env:"CI_FIX_ATTEMPTS"`
	// BranchPrefix prefixes the branches Alfred creates.
	BranchPrefix string `yaml:"branch_prefix" env:"BRANCH_PREFIX"`
	// GitName is the commit author and committer name.
	GitName string `yaml:"git_name" env:"GIT_NAME"`
	// GitEmail is the commit author and committer e-mail.
	GitEmail string `yaml:"git_email" env:"GIT_EMAIL"`
}

// Workers tunes the mailbox workers.
type Workers struct {
	// Count is the number of concurrent workers.
	Count int `yaml:"count" env:"COUNT"`
	// LeaseTTL is how long a mailbox lease lives without a heartbeat.
	LeaseTTL time.Duration `yaml:"lease_ttl" env:"LEASE_TTL"`
	// PollInterval is how often an idle worker looks for work.
	PollInterval time.Duration `yaml:"poll_interval" env:"POLL_INTERVAL"`
	// ReconcileInterval is how often open mailboxes are compared with their forge to catch
	// changes whose webhook was lost (spec/reliability.md); default 5m.
	ReconcileInterval time.Duration `yaml:"reconcile_interval" env:"RECONCILE_INTERVAL"`
	// ReconcileBatch bounds the mailboxes compared per forge and interval; default 50.
	ReconcileBatch int `yaml:"reconcile_batch" env:"RECONCILE_BATCH"`
	// PoisonAttempts is how many failed attempts set an event aside, and how many claims of a
	// mailbox that stopped the process block it; default 5.
	PoisonAttempts int `yaml:"poison_attempts" env:"POISON_ATTEMPTS"`
	// Runs is how many agent runs this process makes at once (default 2). Count workers handle
	// events apart from them, so a long run does not delay other issues' reactions.
	Runs int `yaml:"runs" env:"RUNS"`
	// RunsPerProject bounds the agent runs of one repository at once (0, the default: only Runs).
	RunsPerProject int `yaml:"runs_per_project" env:"RUNS_PER_PROJECT"`
}

// Runner limits the disposable agent containers.
type Runner struct {
	// UID is the numeric user the agent runs as; never 0.
	UID int `yaml:"uid" env:"UID"`
	// GID is the numeric group the agent runs as.
	GID int `yaml:"gid" env:"GID"`
	// MemoryBytes is the container memory limit.
	MemoryBytes int64 `yaml:"memory_bytes" env:"MEMORY_BYTES"`
	// CPUs is the container CPU limit (1.5 = one and a half cores).
	CPUs float64 `yaml:"cpus" env:"CPUS"`
	// PIDs is the container process limit.
	PIDs int64 `yaml:"pids" env:"PIDS"`
	// Timeout bounds one phase.
	Timeout time.Duration `yaml:"timeout" env:"TIMEOUT"`
	// MaxOutputBytes caps the agent output kept from one phase.
	MaxOutputBytes int64 `yaml:"max_output_bytes" env:"MAX_OUTPUT_BYTES"`
	// HostNetwork runs containers on the host network instead of the default bridge.
	HostNetwork bool `yaml:"host_network" env:"HOST_NETWORK"`
}

// Agent is one coding-agent configuration.
type Agent struct {
	// Name identifies the agent in Phases. Same syntax as a forge name.
	Name string `yaml:"name"`
	// Adapter is the runner/agent adapter: "script", "claude-code", "codex", "opencode",
	// "copilot" or "gemini". Defaults to Name, so `name: script` alone selects the script
	// adapter.
	Adapter string `yaml:"adapter"`
	// Image is the container image the agent runs in.
	Image string `yaml:"image"`
	// Script is the scenario file of the script adapter.
	Script string `yaml:"script,omitempty"`
	// APIKey is the model provider's key, passed only in the container's environment
	// (claude-code: ANTHROPIC_API_KEY; codex: CODEX_API_KEY; opencode: the variable named by
	// APIKeyEnv; copilot: COPILOT_GITHUB_TOKEN; gemini: GEMINI_API_KEY — spec/agents.md).
	APIKey Secret `yaml:"api_key,omitempty"`
	// APIKeyFile is the file APIKey was read from, if any.
	APIKeyFile string `yaml:"api_key_file,omitempty"`
	// Model overrides the adapter's default model.
	Model string `yaml:"model,omitempty"`
	// BaseURL points the CLI at another model endpoint (a proxy): claude-code, codex, gemini;
	// for copilot it selects bring-your-own-key mode with APIKey as the provider's key.
	BaseURL string `yaml:"base_url,omitempty"`
	// APIKeyEnv names the environment variable opencode reads the key from
	// (e.g. ANTHROPIC_API_KEY, OPENAI_API_KEY).
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
}

// Adapter names known to the runner.
const (
	AdapterScript     = "script"
	AdapterClaudeCode = "claude-code"
	AdapterCodex      = "codex"
	AdapterOpencode   = "opencode"
	AdapterCopilot    = "copilot"
	AdapterGemini     = "gemini"
)

// Phases maps a phase name (runner.Phase: analysis, development, ci_fix, review_fix,
// conflict_resolution, answer, review) to an agent name. The key "default" applies to the
// phases not listed.
type Phases map[string]string

// PhaseDefault is the Phases key for the phases not listed.
const PhaseDefault = "default"

// knownPhases are the keys Phases accepts: PhaseDefault and the runner/phase constants.
var knownPhases = []string{PhaseDefault, string(phase.Analysis), string(phase.Development),
	string(phase.CIFix), string(phase.ReviewFix), string(phase.ConflictResolution),
	string(phase.Answer), string(phase.Review)}

// Agent returns the agent name for phase, falling back to "default".
func (p Phases) Agent(phase string) string { return cmp.Or(p[phase], p[PhaseDefault]) }

// Agent returns the declared agent called name.
func (c *Config) Agent(name string) (Agent, bool) {
	i := slices.IndexFunc(c.Agents, func(a Agent) bool { return a.Name == name })
	if i < 0 {
		return Agent{}, false
	}
	return c.Agents[i], true
}

// Forge returns the declared forge called name.
func (c *Config) Forge(name string) (Forge, bool) {
	i := slices.IndexFunc(c.Forges, func(f Forge) bool { return f.Name == name })
	if i < 0 {
		return Forge{}, false
	}
	return c.Forges[i], true
}

// Default returns a Config holding every default and nothing else (no forge, agent or
// database URL, so it does not validate yet).
func Default() *Config {
	// Fields whose zero value is meaningful (uid and gid 0 = root, ci_fix_attempts 0 = off)
	// get their defaults here, before the file and the environment, so that an explicit 0
	// stays visible to Validate. All the others get theirs in setDefaults with cmp.Or.
	c := &Config{
		Runner:    Runner{UID: 65532, GID: 65532},
		Lifecycle: Lifecycle{CIFixAttempts: 3},
	}
	c.setDefaults()
	return c
}

// setDefaults fills the fields that are still zero. It runs after the file and the
// environment, so defaults that depend on other fields see their final values.
func (c *Config) setDefaults() {
	c.Listen = cmp.Or(c.Listen, ":8080")
	c.DataDir = cmp.Or(c.DataDir, "/var/lib/alfred")
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 5<<20)

	c.Labels = c.Labels.WithDefaults()

	lc := &c.Lifecycle
	lc.QuestionDeadline = cmp.Or(lc.QuestionDeadline, 24*time.Hour)
	lc.CIWait = cmp.Or(lc.CIWait, 30*time.Minute)
	lc.CIPoll = cmp.Or(lc.CIPoll, 30*time.Second)
	lc.BranchPrefix = cmp.Or(lc.BranchPrefix, "agent/")
	lc.GitName = cmp.Or(lc.GitName, "Alfred")
	lc.GitEmail = cmp.Or(lc.GitEmail, "alfred@localhost")

	w := &c.Workers
	w.Count = cmp.Or(w.Count, 2)
	w.LeaseTTL = cmp.Or(w.LeaseTTL, 60*time.Second)
	w.PollInterval = cmp.Or(w.PollInterval, time.Second)
	w.ReconcileInterval = cmp.Or(w.ReconcileInterval, 5*time.Minute)
	w.ReconcileBatch = cmp.Or(w.ReconcileBatch, 50)
	w.PoisonAttempts = cmp.Or(w.PoisonAttempts, 5)
	w.Runs = cmp.Or(w.Runs, 2)

	r := &c.Runner
	r.MemoryBytes = cmp.Or(r.MemoryBytes, 2<<30)
	r.CPUs = cmp.Or(r.CPUs, 1.0)
	r.PIDs = cmp.Or(r.PIDs, 512)
	r.Timeout = cmp.Or(r.Timeout, 30*time.Minute)
	r.MaxOutputBytes = cmp.Or(r.MaxOutputBytes, 1<<20)

	for i := range c.Forges {
		f := &c.Forges[i]
		f.BaseURL = strings.TrimRight(f.BaseURL, "/")
		gitUser := f.BotUser
		if f.Kind == forge.KindGitLab {
			gitUser = "oauth2"
		}
		f.GitUser = cmp.Or(f.GitUser, gitUser)
	}
	for i := range c.Agents {
		c.Agents[i].Adapter = cmp.Or(c.Agents[i].Adapter, c.Agents[i].Name)
	}
	if c.Phases[PhaseDefault] == "" && len(c.Agents) == 1 {
		if c.Phases == nil {
			c.Phases = Phases{}
		}
		c.Phases[PhaseDefault] = c.Agents[0].Name
	}
}

// Load reads the configuration: defaults, then the YAML file at path (DefaultPath when
// empty), then the ALFRED_* variables of environ (see the package documentation), then
// Validate. A missing file is not an error by itself: the environment may supply everything,
// and Validate says what is still missing. Errors name the offending key, never a secret value.
func Load(path string, environ []string) (*Config, error) {
	path = cmp.Or(path, DefaultPath)
	c := Default()
	missing := false
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		missing = true
	case err != nil:
		return nil, fmt.Errorf("read config: %w", err)
	default:
		if err := decodeYAML(data, c); err != nil {
			return nil, fmt.Errorf("parse config %s: %w", path, err)
		}
		if err := c.checkSecretPairs(); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := c.applyEnv(environ); err != nil {
		return nil, fmt.Errorf("apply environment: %w", err)
	}
	// After the environment, so that a variable can stand in for a secret file that is
	// not mounted here.
	if err := c.readSecretFiles(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.setDefaults()
	if err := c.resolvePaths(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		if missing {
			return nil, fmt.Errorf("config file %s not found and the environment is incomplete: %w", path, err)
		}
		return nil, fmt.Errorf("invalid config %s: %w", path, err)
	}
	return c, nil
}

// decodeYAML decodes data onto c, rejecting unknown keys. Errors leave out the source
// excerpt that goccy/go-yaml prints, since that line may hold a secret.
func decodeYAML(data []byte, c *Config) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := yaml.UnmarshalWithOptions(data, c, yaml.DisallowUnknownField()); err != nil {
		return errors.New(yaml.FormatError(err, false, false))
	}
	return nil
}

// secretRef is one secret field, its *_file companion and its YAML key for messages.
type secretRef struct {
	key  string
	val  *Secret
	file *string
}

// secretRefs lists every secret field of c.
func (c *Config) secretRefs() []secretRef {
	refs := []secretRef{{"database_url", &c.DatabaseURL, &c.DatabaseURLFile}}
	for i := range c.Forges {
		f := &c.Forges[i]
		refs = append(refs,
			secretRef{fmt.Sprintf("forges[%d].token", i), &f.Token, &f.TokenFile},
			secretRef{fmt.Sprintf("forges[%d].webhook_secret", i), &f.WebhookSecret, &f.WebhookSecretFile})
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		refs = append(refs, secretRef{fmt.Sprintf("agents[%d].api_key", i), &a.APIKey, &a.APIKeyFile})
	}
	return refs
}

// checkSecretPairs rejects a secret given both as a value and as a file in the YAML file.
func (c *Config) checkSecretPairs() error {
	var errs []error
	for _, r := range c.secretRefs() {
		if *r.file != "" && *r.val != "" {
			errs = append(errs, &FieldError{Key: r.key, Reason: "both " + r.key + " and " + r.key + "_file are set"})
		}
	}
	return errors.Join(errs...)
}

// resolvePaths makes data_dir and the agents' script files absolute: a relative path is
// relative to dir, the configuration file's directory (as for the *_file secrets). The data
// directory is mounted into containers, which need absolute host paths.
func (c *Config) resolvePaths(dir string) error {
	abs := func(p string) (string, error) {
		if p == "" || filepath.IsAbs(p) {
			return p, nil
		}
		return filepath.Abs(filepath.Join(dir, p))
	}
	var err error
	if c.DataDir, err = abs(c.DataDir); err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	for i := range c.Agents {
		if c.Agents[i].Script, err = abs(c.Agents[i].Script); err != nil {
			return fmt.Errorf("agents[%d].script: %w", i, err)
		}
	}
	return nil
}

// readSecretFiles reads every <key>_file whose secret is still empty (the environment reads its
// own _FILE variables). Relative paths are relative to dir, the configuration file's directory.
func (c *Config) readSecretFiles(dir string) error {
	var errs []error
	for _, r := range c.secretRefs() {
		if *r.file == "" || *r.val != "" {
			continue
		}
		p := *r.file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		v, err := ReadSecretFile(p)
		if err != nil {
			errs = append(errs, &FieldError{Key: r.key + "_file", Reason: err.Error()})
			continue
		}
		*r.val = v
	}
	return errors.Join(errs...)
}

// ReadSecretFile returns the content of the secret file at path without its trailing newline
// (\n or \r\n). The error names the path, never the content.
func ReadSecretFile(path string) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read secret file: %w", err)
	}
	return Secret(strings.TrimRight(string(b), "\r\n")), nil
}

// Secrets returns every non-empty secret value, longest first, without duplicates. The
// password of a URL-shaped database_url is listed on its own too.
func (c *Config) Secrets() []string {
	var out []string
	for _, r := range c.secretRefs() {
		if *r.val != "" {
			out = append(out, r.val.Reveal())
		}
	}
	if u, err := url.Parse(c.DatabaseURL.Reveal()); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// Censor returns the Censor of this configuration: every secret of Secrets, with the HTTP
// Basic forms for each forge's bot and git user and for the database user. Every text that
// leaves the process (logs, comments, run output, errors) passes it.
func (c *Config) Censor() *censor.Censor {
	var users []string
	for _, f := range c.Forges {
		users = append(users, f.BotUser, f.GitUser)
	}
	if u, err := url.Parse(c.DatabaseURL.Reveal()); err == nil && u.User != nil {
		users = append(users, u.User.Username())
	}
	return censor.New(censor.Config{Secrets: c.Secrets(), Users: users})
}

// Dump renders the effective configuration as YAML, every secret shown as [Redacted] (and the
// whole text passed through Censor, should a secret sit in a field that is not a Secret).
func (c *Config) Dump() string {
	b, err := yaml.Marshal(c)
	if err != nil {
		return "# cannot render the configuration: " + c.Censor().String(err.Error()) + "\n"
	}
	return c.Censor().String(string(b))
}
