package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/alfred-bot/alfred/internal/base/censor"
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
	// DatabaseURL selects the store (internal/store.Open). Empty, the default, is the embedded
	// SQLite database <data_dir>/alfred.db, for one process; sqlite:PATH is a SQLite database
	// at PATH (relative to data_dir); a postgres:// URL or a key=value DSN is PostgreSQL, which
	// several replicas can share. It is a secret because it may hold a password.
	DatabaseURL Secret `yaml:"database_url" env:"-"`
	// DatabaseURLFile is the file DatabaseURL was read from, if any.
	DatabaseURLFile string `yaml:"database_url_file,omitempty" env:"-"`
	// DataDir holds git mirrors, worktrees and run directories.
	DataDir string `yaml:"data_dir" env:"DATA_DIR"`
	// MaxBodyBytes caps the size of a webhook body.
	MaxBodyBytes int64 `yaml:"max_body_bytes" env:"MAX_BODY_BYTES"`
	// HTTP limits the webhook server's connections.
	HTTP HTTP `yaml:"http" envPrefix:"HTTP_"`
	// Database sizes the PostgreSQL connection pool.
	Database Database `yaml:"database" envPrefix:"DATABASE_"`
	// Admin is the separate listener of the status endpoints.
	Admin Admin `yaml:"admin" envPrefix:"ADMIN_"`

	// Forges are the GitLab and Forgejo servers that send webhooks.
	Forges []Forge `yaml:"forges" env:"-"`
	// Labels are the issue label names that carry the state; empty names take
	// mailbox.DefaultLabels.
	Labels mailbox.Labels `yaml:"labels" envPrefix:"LABELS_"`
	// Lifecycle tunes the issue life cycle.
	Lifecycle Lifecycle `yaml:"lifecycle" envPrefix:"LIFECYCLE_"`
	// Permissions says which forge role each kind of human input needs (spec/authorization.md).
	Permissions Permissions `yaml:"permissions" envPrefix:"PERMISSIONS_"`
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
	// RetentionDays purges the events, run logs, prompts and outputs of mailboxes closed more
	// than this many days ago (0 keeps everything); scopes may override it.
	RetentionDays int `yaml:"retention_days" env:"RETENTION_DAYS"`
	// Scopes override some settings per organization ("acme") or project ("acme/shop"; GitLab:
	// the full path), compared without case as the forges compare paths; the most specific
	// scope wins. See Scope and Config.For.
	Scopes map[string]Scope `yaml:"scopes" env:"-"`
	// SelfReview configures the self_review phase: the bot reads its own merge request before
	// a human does (spec/lifecycle.md, "Self-review").
	SelfReview SelfReview `yaml:"self_review" envPrefix:"SELF_REVIEW_"`
}

// SelfReview configures the self_review phase (mailbox.SelfReviewConfig).
type SelfReview struct {
	// Enabled turns the self-review on for every project; a scope's self_review turns it on or
	// off for an organization or a project. Off by default: it costs one read-only run per
	// merge request, and one review_fix round when it finds something blocking.
	Enabled bool `yaml:"enabled" env:"ENABLED"`
	// MaxRounds bounds the review_fix rounds for blocking findings per merge request
	// (default 1).
	MaxRounds int `yaml:"max_rounds" env:"MAX_ROUNDS"`
	// AfterFixes also reviews the merge request after each ci_fix and review_fix push.
	AfterFixes bool `yaml:"after_fixes" env:"AFTER_FIXES"`
}

// Sessions controls whether a mailbox's runs continue one agent session (spec/sessions.md).
type Sessions struct {
	// AgentSessionResume turns resumable sessions on (default true). Off means no session name,
	// no session mount and no lookup: every run starts fresh.
	AgentSessionResume *bool `yaml:"agent_session_resume" env:"AGENT_SESSION_RESUME"`
	// Overrides set AgentSessionResume per organization ("acme") or per project
	// ("acme/shop", GitLab: the full path), compared without case. The most specific entry
	// wins.
	Overrides map[string]bool `yaml:"overrides" env:"-"`
}

// ResumeEnabled reports whether sessions resume for repo ("owner/name" or a GitLab path
// "group/sub/name"): the project's override, else the closest group's, else the default.
func (s Sessions) ResumeEnabled(repo string) bool {
	for p := repo; p != ""; {
		if v, _, ok := lookupFold(s.Overrides, p); ok {
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
	// Repositories are repositories ("owner/name", GitLab paths) of this Alfred's: alfred
	// doctor checks them besides those with an open mailbox (the bot's permission and the
	// webhook), and reconciliation acts on an issue assigned to the bot there even before any
	// delivery came from the repository. A repository whose webhook points at this Alfred is
	// found without being listed; list those whose hooks the bot may not read (Forgejo: not a
	// repository admin; GitLab: below Maintainer). See spec/reliability.md.
	Repositories []string `yaml:"repositories"`
	// GitUser is the user name for git basic auth over HTTPS (the password is Token).
	// Defaults to "oauth2" on GitLab and to BotUser on Forgejo.
	GitUser string `yaml:"git_user"`
	// MaxCommentBytes caps one comment Alfred posts; a longer one is split into marked parts
	// (default: GitLab 1,000,000, Forgejo 65,000; spec/edge.md).
	MaxCommentBytes int `yaml:"max_comment_bytes"`
	// MaxDescriptionBytes caps an issue or merge request description Alfred writes (same
	// defaults): a longer merge request description is cut with a notice; an issue description
	// is never cut, Alfred's section that would not fit goes into a comment of its own.
	MaxDescriptionBytes int `yaml:"max_description_bytes"`
	// Projects holds checkout settings for large repositories of this forge, by repository
	// path ("group/sub/repo"); repositories not listed are checked out whole from a full mirror
	// (spec/worktrees.md).
	Projects map[string]Project `yaml:"projects,omitempty"`
	// Transport is how the forge's changes reach Alfred: "webhook" (the default: the forge
	// POSTs deliveries), "poll" (Alfred asks the forge every PollInterval; no public URL
	// needed), or both ("both", [webhook, poll]). See spec/transport.md.
	Transport Transports `yaml:"transport,omitempty"`
	// PollInterval is the time between two polls of a forge whose transport includes poll
	// (0: DefaultPollInterval, 15s; PollEvery applies the default).
	PollInterval time.Duration `yaml:"poll_interval,omitempty"`
}

// Project holds the checkout settings of one repository.
type Project struct {
	// Sparse lists the directories (relative to the repository root, e.g. "services/api")
	// that worktrees check out, in git's cone mode; files at the root always are. Empty means
	// the whole tree.
	Sparse []string `yaml:"sparse,omitempty"`
	// PartialClone makes the repository's mirror a partial clone without file contents
	// (--filter=blob:none); a file's content is fetched the first time a worktree needs it.
	PartialClone bool `yaml:"partial_clone,omitempty"`
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
	// ReviewFixAttempts is how many review_fix phases run per merge request before the issue is
	// blocked; 0 disables them.
	ReviewFixAttempts int `yaml:"review_fix_attempts" env:"REVIEW_FIX_ATTEMPTS"`
	// RetryUntilGreenMax is the hard ceiling of ci_fix and review_fix runs under the
	// ai::retry_until_green label.
	RetryUntilGreenMax int `yaml:"retry_until_green_max" env:"RETRY_UNTIL_GREEN_MAX"`
	// ReviewQuiet is how long Alfred waits after the last review event (a review submitted as
	// several deliveries, one GitLab note each) before it starts the review_fix run.
	ReviewQuiet time.Duration `yaml:"review_quiet" env:"REVIEW_QUIET"`
	// ReviewVerdicts lets a review of a merge request that is not the bot's approve or request
	// changes when the agent concludes so; off, every such review only comments.
	ReviewVerdicts bool `yaml:"review_verdicts" env:"REVIEW_VERDICTS"`
	// AutoMerge makes Alfred merge its merge request once CI is green on its head, the forge's
	// required approvals are present and no review thread is open, through the forge's merge
	// API (spec/lifecycle.md, "Auto-merge"). Off by default; the labels.auto_merge label
	// turns it on for one issue, scopes for an organization or a project.
	AutoMerge bool `yaml:"auto_merge" env:"AUTO_MERGE"`
	// MergeMethod is how an auto-merge merges: "merge" (the default, also for ""), "squash" or
	// "rebase". GitLab's merge call has no rebase: there "rebase" merges the way the project's
	// merge method says, as "merge" does.
	MergeMethod string `yaml:"merge_method" env:"MERGE_METHOD"`
	// AutoMergeMinApprovals is how many approvals of the merged head, by accounts with the
	// role permissions.approval names other than the bot, auto-merge waits for, whatever the
	// forge requires (default 1; 0 only when set explicitly).
	AutoMergeMinApprovals *int `yaml:"auto_merge_min_approvals" env:"AUTO_MERGE_MIN_APPROVALS"`
	// Shadow puts every project in shadow mode (spec/operations.md, "Shadow mode"): Alfred
	// follows the issues it is assigned to and computes everything, acknowledgements,
	// questions, plans, labels and the read-only runs, but writes nothing to the forge; the
	// pages show what it would have posted. A run that pushes is not started. Scopes set it
	// for an organization or a project; off by default.
	Shadow bool `yaml:"shadow" env:"SHADOW"`
	// BranchPrefix prefixes the branches Alfred creates.
	BranchPrefix string `yaml:"branch_prefix" env:"BRANCH_PREFIX"`
	// BudgetUSD is the most an issue may cost, in US dollars as the adapters report it: once
	// reached, the next run does not start and the issue is blocked until ai::retry_once
	// allows one more run. Nil or 0: no budget. Runs whose adapter reports no cost count 0.
	BudgetUSD *float64 `yaml:"budget_usd" env:"BUDGET_USD"`
	// GitName is the commit author and committer name.
	GitName string `yaml:"git_name" env:"GIT_NAME"`
	// GitEmail is the commit author and committer e-mail.
	GitEmail string `yaml:"git_email" env:"GIT_EMAIL"`
}

// Phases maps a phase name (phase.Phase: analysis, development, ci_fix, review_fix,
// conflict_resolution, answer, review) to an agent name. The key "default" applies to the
// phases not listed.
type Phases map[string]string

// PhaseDefault is the Phases key for the phases not listed.
const PhaseDefault = "default"

// knownPhases are the keys Phases accepts: PhaseDefault and the runner/phase constants.
var knownPhases = func() []string {
	names := []string{PhaseDefault}
	for _, p := range phase.All() {
		names = append(names, string(p))
	}
	return names
}()

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
	// Fields whose zero value is meaningful (uid and gid 0 = root, ci_fix_attempts and
	// review_fix_attempts 0 = off)
	// get their defaults here, before the file and the environment, so that an explicit 0
	// stays visible to Validate. All the others get theirs in setDefaults with cmp.Or.
	c := &Config{
		Runner:    Runner{UID: 65532, GID: 65532},
		Lifecycle: Lifecycle{CIFixAttempts: 3, ReviewFixAttempts: 5},
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
	c.Permissions.Cache = cmp.Or(c.Permissions.Cache, time.Minute)

	h := &c.HTTP
	h.ReadHeaderTimeout = cmp.Or(h.ReadHeaderTimeout, 10*time.Second)
	h.ReadTimeout = cmp.Or(h.ReadTimeout, 30*time.Second)
	h.WriteTimeout = cmp.Or(h.WriteTimeout, 60*time.Second)
	h.IdleTimeout = cmp.Or(h.IdleTimeout, 60*time.Second)
	h.MaxConcurrent = cmp.Or(h.MaxConcurrent, 64)
	h.MaxReaders = cmp.Or(h.MaxReaders, 1024)
	h.MaxBodyMemory = cmp.Or(h.MaxBodyMemory, 64<<20)
	h.MaxHeaderBytes = cmp.Or(h.MaxHeaderBytes, 64<<10)

	d := &c.Database
	d.MaxOpenConns = cmp.Or(d.MaxOpenConns, 16)
	d.MaxIdleConns = cmp.Or(d.MaxIdleConns, 16)
	d.ConnMaxLifetime = cmp.Or(d.ConnMaxLifetime, 30*time.Minute)
	d.ConnMaxIdleTime = cmp.Or(d.ConnMaxIdleTime, 5*time.Minute)

	c.Labels = c.Labels.WithDefaults()

	lc := &c.Lifecycle
	lc.QuestionDeadline = cmp.Or(lc.QuestionDeadline, 24*time.Hour)
	lc.CIWait = cmp.Or(lc.CIWait, 30*time.Minute)
	lc.CIPoll = cmp.Or(lc.CIPoll, 30*time.Second)
	lc.RetryUntilGreenMax = cmp.Or(lc.RetryUntilGreenMax, 10)
	lc.ReviewQuiet = cmp.Or(lc.ReviewQuiet, 30*time.Second)
	lc.BranchPrefix = cmp.Or(lc.BranchPrefix, "agent/")
	c.SelfReview.MaxRounds = cmp.Or(c.SelfReview.MaxRounds, 1)
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
	r.Runtime = cmp.Or(r.Runtime, RuntimeDocker)
	if r.Runtime == RuntimeKubernetes {
		r.Kubernetes.PullPolicy = cmp.Or(r.Kubernetes.PullPolicy, "IfNotPresent")
	}

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
// excerpt that goccy/go-yaml prints, since that line may hold a secret, and the values of the
// file's secret keys the message itself quotes (yamlSecretValues): a secret YAML reads as
// something else, an unquoted value starting with "*" read as an alias, is named in the
// message ("could not find alias \"…\""), which is printed before any censor exists.
func decodeYAML(data []byte, c *Config) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := yaml.UnmarshalWithOptions(data, c, yaml.DisallowUnknownField()); err != nil {
		msg := yaml.FormatError(err, false, false)
		return errors.New(censor.New(censor.Config{Secrets: yamlSecretValues(data)}).String(msg))
	}
	return nil
}

// secretKeyRE matches a line of a YAML file that gives a secret key (the last part of a
// secretRefs name: database_url, token, webhook_secret, api_key) a value; group 1 is the value.
var secretKeyRE = regexp.MustCompile(`(?m)^[ \t-]*(?:database_url|token|webhook_secret|api_key)[ \t]*:[ \t]*(.*?)[ \t]*$`)

// yamlSecretValues returns the values the secret keys of a YAML file's lines are given, as
// written and without the quotes, the alias, anchor or tag sign YAML reads before them and a
// trailing comment: what a parse error may quote of them.
func yamlSecretValues(data []byte) []string {
	var out []string
	for _, m := range secretKeyRE.FindAllSubmatch(data, -1) {
		v := string(m[1])
		if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		out = append(out, v, strings.Trim(v, `"'`), strings.TrimLeft(v, "*&!"))
	}
	return out
}

// secretRef is one secret field, its *_file companion and its YAML key for messages.
type secretRef struct {
	key  string
	val  *Secret
	file *string
}

// secretRefs lists every secret field of c.
func (c *Config) secretRefs() []secretRef {
	refs := []secretRef{{"database_url", &c.DatabaseURL, &c.DatabaseURLFile},
		{"admin.token", &c.Admin.Token, &c.Admin.TokenFile}}
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

// Secrets returns every non-empty secret value (those of KeyedSecrets), longest first, without
// duplicates. The password of a URL-shaped database_url is listed on its own too.
func (c *Config) Secrets() []string {
	var out []string
	for _, ks := range c.KeyedSecrets() {
		out = append(out, ks.Value.Reveal())
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// Censor returns the Censor of this configuration: every secret of Secrets, with the HTTP
// Basic forms for each forge's bot and git user and for the database user, keeping Alfred's
// own fixed texts (mailbox.MarkerTexts, the label names) intact. Every text that leaves the
// process (logs, comments, run output, errors) passes it.
func (c *Config) Censor() *censor.Censor {
	var users []string
	for _, f := range c.Forges {
		users = append(users, f.BotUser, f.GitUser)
	}
	if u := c.databaseUser(); u != nil {
		users = append(users, u.Username())
	}
	// Alfred's own structure (marker pieces, label names) survives a secret that is one of its
	// words; Validate refuses such secrets anyway, this keeps a Censor built otherwise safe.
	keep := slices.Concat(mailbox.MarkerTexts(), c.Labels.WithDefaults().All())
	return censor.New(censor.Config{Secrets: c.Secrets(), Users: users, Keep: keep})
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
