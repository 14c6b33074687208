package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Every secret in these tests contains marker, so one Contains check proves none leaked.
const marker = "s3cr3t"

const fullYAML = `
listen: "127.0.0.1:9090"
public_url: https://alfred.example.org
database_url: postgres://alfred:pw-s3cr3t-db@db:5432/alfred?sslmode=disable
data_dir: /srv/alfred
max_body_bytes: 1048576
forges:
  - name: forgejo
    kind: forgejo
    base_url: https://forgejo.example.org/
    token: tok-s3cr3t-forgejo
    webhook_secret: hook-s3cr3t-forgejo
    bot_user: alfred
    other_bots: [renovate, dependabot]
  - name: gitlab-main
    kind: gitlab
    base_url: https://gitlab.example.org
    token: tok-s3cr3t-gitlab
    webhook_secret: hook-s3cr3t-gitlab
    bot_user: alfred-bot
labels:
  in_review: review::pending
lifecycle:
  question_deadline: 2h
  ci_wait: 45m
  ci_fix_attempts: 0
  branch_prefix: bot/
workers:
  count: 4
  lease_ttl: 2m
  poll_interval: 500ms
runner:
  memory_bytes: 1073741824
  cpus: 1.5
  timeout: 1h
  host_network: true
agents:
  - name: script
    image: alfred/script-agent:dev
    script: /etc/alfred/script.yaml
  - name: claude
    adapter: claude-code
    image: alfred/claude-code:dev
    api_key: key-s3cr3t-claude
    model: claude-sonnet-4-5
phases:
  default: script
  development: claude
`

// minimalYAML is the least that validates.
const minimalYAML = `
database_url: postgres://localhost/alfred
forges:
  - name: forgejo
    kind: forgejo
    base_url: https://forgejo.example.org
    token: tok-s3cr3t
    webhook_secret: hook-s3cr3t
    bot_user: alfred
agents:
  - name: script
    image: alfred/script-agent:dev
    script: /etc/alfred/script.yaml
`

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// loadYAML writes yml to a temporary alfred.yaml and loads it with environ.
func loadYAML(t *testing.T, yml string, environ ...string) (*Config, error) {
	t.Helper()
	return Load(writeFile(t, t.TempDir(), "alfred.yaml", yml), environ)
}

func TestLoadYAML(t *testing.T) {
	t.Parallel()

	t.Run("full", func(t *testing.T) {
		t.Parallel()
		c, err := loadYAML(t, fullYAML)
		require.NoError(t, err)

		require.Equal(t, "127.0.0.1:9090", c.Listen)
		require.Equal(t, "https://alfred.example.org", c.PublicURL)
		require.Equal(t, "postgres://alfred:pw-s3cr3t-db@db:5432/alfred?sslmode=disable", c.DatabaseURL.Reveal())
		require.Equal(t, "/srv/alfred", c.DataDir)
		require.EqualValues(t, 1<<20, c.MaxBodyBytes)

		require.Equal(t, []Forge{{
			Name: "forgejo", Kind: forge.KindForgejo, BaseURL: "https://forgejo.example.org",
			Token: "tok-s3cr3t-forgejo", WebhookSecret: "hook-s3cr3t-forgejo", BotUser: "alfred",
			OtherBots: []string{"renovate", "dependabot"}, GitUser: "alfred",
		}, {
			Name: "gitlab-main", Kind: forge.KindGitLab, BaseURL: "https://gitlab.example.org",
			Token: "tok-s3cr3t-gitlab", WebhookSecret: "hook-s3cr3t-gitlab", BotUser: "alfred-bot",
			GitUser: "oauth2",
		}}, c.Forges)

		require.Equal(t, "review::pending", c.Labels.InReview)
		require.Equal(t, "status::done", c.Labels.Done, "unlisted labels keep their defaults")
		require.Equal(t, Lifecycle{
			QuestionDeadline: 2 * time.Hour, CIWait: 45 * time.Minute, CIPoll: 30 * time.Second, CIFixAttempts: 0,
			ReviewFixAttempts: 5, RetryUntilGreenMax: 10, ReviewQuiet: 30 * time.Second,
			BranchPrefix: "bot/", GitName: "Alfred", GitEmail: "alfred@localhost",
		}, c.Lifecycle, "ci_fix_attempts: 0 is kept, not replaced by the default")
		require.Equal(t, Workers{Count: 4, LeaseTTL: 2 * time.Minute, PollInterval: 500 * time.Millisecond,
			ReconcileInterval: 5 * time.Minute, ReconcileBatch: 50, PoisonAttempts: 5, Runs: 2}, c.Workers)
		require.Equal(t, Runner{
			UID: 65532, GID: 65532, MemoryBytes: 1 << 30, CPUs: 1.5, PIDs: 512, Timeout: time.Hour,
			MaxOutputBytes: 1 << 20, HostNetwork: true, Runtime: RuntimeDocker,
		}, c.Runner)

		require.Equal(t, []Agent{
			{Name: "script", Adapter: AdapterScript, Image: "alfred/script-agent:dev", Script: "/etc/alfred/script.yaml"},
			{Name: "claude", Adapter: AdapterClaudeCode, Image: "alfred/claude-code:dev", APIKey: "key-s3cr3t-claude", Model: "claude-sonnet-4-5"},
		}, c.Agents)
		require.Equal(t, "claude", c.Phases.Agent("development"))
		require.Equal(t, "script", c.Phases.Agent("review"))
		f, ok := c.Forge("gitlab-main")
		require.True(t, ok)
		require.Equal(t, forge.KindGitLab, f.Kind)
		a, ok := c.Agent("claude")
		require.True(t, ok)
		require.Equal(t, AdapterClaudeCode, a.Adapter)
	})

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		c, err := loadYAML(t, minimalYAML)
		require.NoError(t, err)
		want := Default()
		require.Equal(t, want.Listen, c.Listen)
		require.Equal(t, ":8080", c.Listen)
		require.Equal(t, "/var/lib/alfred", c.DataDir)
		require.EqualValues(t, 5242880, c.MaxBodyBytes)
		require.Equal(t, want.Labels, c.Labels)
		require.Equal(t, "ai::validate_plan", c.Labels.ValidatePlan)
		require.Equal(t, Lifecycle{
			QuestionDeadline: 24 * time.Hour, CIWait: 30 * time.Minute, CIPoll: 30 * time.Second, CIFixAttempts: 3,
			ReviewFixAttempts: 5, RetryUntilGreenMax: 10, ReviewQuiet: 30 * time.Second,
			BranchPrefix: "agent/", GitName: "Alfred", GitEmail: "alfred@localhost",
		}, c.Lifecycle)
		require.Equal(t, Workers{Count: 2, LeaseTTL: time.Minute, PollInterval: time.Second,
			ReconcileInterval: 5 * time.Minute, ReconcileBatch: 50, PoisonAttempts: 5, Runs: 2}, c.Workers)
		require.Equal(t, Runner{
			UID: 65532, GID: 65532, MemoryBytes: 2147483648, CPUs: 1, PIDs: 512,
			Timeout: 30 * time.Minute, MaxOutputBytes: 1048576, Runtime: RuntimeDocker,
		}, c.Runner)
		require.Equal(t, Phases{PhaseDefault: "script"}, c.Phases, "a single agent becomes the default")
		require.Equal(t, AdapterScript, c.Agents[0].Adapter, "adapter defaults to the name")
	})

	t.Run("git_user explicit", func(t *testing.T) {
		t.Parallel()
		c, err := loadYAML(t, strings.Replace(minimalYAML, "bot_user: alfred", "bot_user: alfred\n    git_user: git", 1))
		require.NoError(t, err)
		require.Equal(t, "git", c.Forges[0].GitUser)
	})

	for name, tc := range map[string]struct{ yml, wantErr string }{
		"unknown key":      {minimalYAML + "listn: x\n", `unknown field "listn"`},
		"bad duration":     {minimalYAML + "workers:\n  lease_ttl: soon\n", "soon"},
		"not yaml":         {"forges: [", "parse config"},
		"both secret kind": {strings.Replace(minimalYAML, "token: tok-s3cr3t", "token: tok-s3cr3t\n    token_file: t", 1), "forges[0].token: both forges[0].token and forges[0].token_file are set"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := loadYAML(t, tc.yml)
			require.ErrorContains(t, err, tc.wantErr)
			require.NotContains(t, err.Error(), marker)
		})
	}

	t.Run("typo next to a secret does not echo the line", func(t *testing.T) {
		t.Parallel()
		_, err := loadYAML(t, strings.Replace(minimalYAML, "token: tok-s3cr3t", "tokn: tok-s3cr3t", 1))
		require.ErrorContains(t, err, `unknown field "tokn"`)
		require.NotContains(t, err.Error(), marker)
	})

	t.Run("empty file", func(t *testing.T) {
		t.Parallel()
		_, err := loadYAML(t, "")
		var fe *FieldError
		require.ErrorAs(t, err, &fe)
		require.ErrorContains(t, err, "forges: at least one forge is required")
	})
}

// envOnly is a complete configuration in environment variables.
var envOnly = []string{
	"ALFRED_DATABASE_URL=postgres://alfred:pw-s3cr3t@db/alfred",
	"ALFRED_FORGES_CODEBERG_KIND=forgejo",
	"ALFRED_FORGES_CODEBERG_BASE_URL=https://codeberg.example.org",
	"ALFRED_FORGES_CODEBERG_TOKEN=tok-s3cr3t",
	"ALFRED_FORGES_CODEBERG_WEBHOOK_SECRET=hook-s3cr3t",
	"ALFRED_FORGES_CODEBERG_BOT_USER=alfred",
	"ALFRED_FORGES_CODEBERG_OTHER_BOTS=renovate, ,dependabot",
	"ALFRED_AGENTS_SCRIPT_IMAGE=alfred/script-agent:dev",
	"ALFRED_AGENTS_SCRIPT_SCRIPT=/etc/alfred/script.yaml",
	"PATH=/usr/bin",
}

func TestLoadEnv(t *testing.T) {
	t.Parallel()

	t.Run("overrides the file", func(t *testing.T) {
		t.Parallel()
		c, err := loadYAML(t, fullYAML,
			"ALFRED_LISTEN=:9999",
			"ALFRED_PUBLIC_URL=",
			"ALFRED_DATA_DIR=/data",
			"ALFRED_DATABASE_URL=postgres://env-s3cr3t@db/alfred",
			"ALFRED_MAX_BODY_BYTES=42",
			"ALFRED_LABELS_DONE=state::done",
			"ALFRED_LIFECYCLE_QUESTION_DEADLINE=90m",
			"ALFRED_LIFECYCLE_CI_FIX_ATTEMPTS=5",
			"ALFRED_WORKERS_COUNT=8",
			"ALFRED_WORKERS_LEASE_TTL=30s",
			"ALFRED_RUNNER_UID=1000",
			"ALFRED_RUNNER_CPUS=0.5",
			"ALFRED_RUNNER_HOST_NETWORK=false",
			"ALFRED_RUNNER_EGRESS_MODE=allowlist",
			"ALFRED_RUNNER_EGRESS_ALLOW=registry.npmjs.org:443,127.0.0.1:11434",
			"ALFRED_FORGES_FORGEJO_TOKEN=tok-env-s3cr3t",
			"ALFRED_FORGES_GITLAB_MAIN_WEBHOOK_SECRET=hook-env-s3cr3t",
			"ALFRED_FORGES_GITLAB_MAIN_OTHER_BOTS=renovate",
			"ALFRED_AGENTS_CLAUDE_API_KEY=key-env-s3cr3t",
			"ALFRED_AGENTS_CLAUDE_MODEL=claude-opus-4-1",
			"ALFRED_PHASES_REVIEW=claude",
			"ALFRED_TEST_DATABASE_URL=ignored",
		)
		require.NoError(t, err)
		require.Equal(t, ":9999", c.Listen)
		require.Equal(t, "https://alfred.example.org", c.PublicURL, "an empty variable is unset")
		require.Equal(t, "/data", c.DataDir)
		require.Equal(t, "postgres://env-s3cr3t@db/alfred", c.DatabaseURL.Reveal())
		require.EqualValues(t, 42, c.MaxBodyBytes)
		require.Equal(t, "state::done", c.Labels.Done)
		require.Equal(t, "review::pending", c.Labels.InReview)
		require.Equal(t, 90*time.Minute, c.Lifecycle.QuestionDeadline)
		require.Equal(t, 5, c.Lifecycle.CIFixAttempts)
		require.Equal(t, Workers{Count: 8, LeaseTTL: 30 * time.Second, PollInterval: 500 * time.Millisecond,
			ReconcileInterval: 5 * time.Minute, ReconcileBatch: 50, PoisonAttempts: 5, Runs: 2}, c.Workers)
		require.Equal(t, 1000, c.Runner.UID)
		require.Equal(t, 0.5, c.Runner.CPUs)
		require.False(t, c.Runner.HostNetwork)
		require.Equal(t, Egress{Mode: EgressAllowlist, Allow: []string{"registry.npmjs.org:443", "127.0.0.1:11434"}}, c.Runner.Egress)
		require.Equal(t, "tok-env-s3cr3t", c.Forges[0].Token.Reveal())
		require.Equal(t, "hook-s3cr3t-forgejo", c.Forges[0].WebhookSecret.Reveal())
		require.Equal(t, "hook-env-s3cr3t", c.Forges[1].WebhookSecret.Reveal())
		require.Equal(t, []string{"renovate"}, c.Forges[1].OtherBots)
		require.Len(t, c.Forges, 2, "variables matched the file's forges")
		require.Equal(t, "key-env-s3cr3t", c.Agents[1].APIKey.Reveal())
		require.Equal(t, "claude-opus-4-1", c.Agents[1].Model)
		require.Equal(t, Phases{"default": "script", "development": "claude", "review": "claude"}, c.Phases)
	})

	t.Run("environment alone, file missing", func(t *testing.T) {
		t.Parallel()
		c, err := Load(filepath.Join(t.TempDir(), "absent.yaml"), envOnly)
		require.NoError(t, err)
		require.Equal(t, []Forge{{
			Name: "codeberg", Kind: forge.KindForgejo, BaseURL: "https://codeberg.example.org",
			Token: "tok-s3cr3t", WebhookSecret: "hook-s3cr3t", BotUser: "alfred",
			OtherBots: []string{"renovate", "dependabot"}, GitUser: "alfred",
		}}, c.Forges)
		require.Equal(t, []Agent{{Name: "script", Adapter: "script", Image: "alfred/script-agent:dev", Script: "/etc/alfred/script.yaml"}}, c.Agents)
		require.Equal(t, "script", c.Phases.Agent("development"))
	})

	t.Run("file missing, environment incomplete", func(t *testing.T) {
		t.Parallel()
		_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"), slices.DeleteFunc(slices.Clone(envOnly),
			func(kv string) bool { return strings.HasPrefix(kv, "ALFRED_FORGES_CODEBERG_TOKEN=") }))
		require.ErrorContains(t, err, "absent.yaml not found and the environment is incomplete")
		require.ErrorContains(t, err, "forges[0].token: required")
	})

	for name, tc := range map[string]struct {
		env     []string
		wantErr string
	}{
		"bad int":       {[]string{"ALFRED_WORKERS_COUNT=many"}, "ALFRED_WORKERS_COUNT: "},
		"bad duration":  {[]string{"ALFRED_RUNNER_TIMEOUT=forever"}, "ALFRED_RUNNER_TIMEOUT: "},
		"bad bool":      {[]string{"ALFRED_RUNNER_HOST_NETWORK=maybe"}, "ALFRED_RUNNER_HOST_NETWORK: "},
		"unknown field": {[]string{"ALFRED_FORGES_FORGEJO_TOKN=tok-s3cr3t"}, "ALFRED_FORGES_FORGEJO_TOKN: unknown variable"},
		"both":          {[]string{"ALFRED_DATABASE_URL=pg-s3cr3t", "ALFRED_DATABASE_URL_FILE=/x"}, "ALFRED_DATABASE_URL: both"},
		"missing file":  {[]string{"ALFRED_AGENTS_SCRIPT_API_KEY_FILE=/nonexistent/key"}, "ALFRED_AGENTS_SCRIPT_API_KEY_FILE: read secret file"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := loadYAML(t, minimalYAML, tc.env...)
			require.ErrorContains(t, err, tc.wantErr)
			require.NotContains(t, err.Error(), marker)
		})
	}

	t.Run("ambiguous name", func(t *testing.T) {
		t.Parallel()
		yml := minimalYAML + `  - name: a-b
    image: i
    adapter: claude-code
  - name: a_b
    image: i
    adapter: claude-code
phases: {default: script}
`
		_, err := loadYAML(t, yml, "ALFRED_AGENTS_A_B_MODEL=m")
		require.ErrorContains(t, err, `ALFRED_AGENTS_A_B_*: "a-b" and "a_b" both map to A_B`)
	})
}

func TestSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "token", "tok-file-s3cr3t\n")
	writeFile(t, dir, "hook", "hook-file-s3cr3t\r\n")
	dbFile := writeFile(t, t.TempDir(), "db", "postgres://file-s3cr3t@db/alfred\n")
	keyFile := writeFile(t, t.TempDir(), "key", "key-file-s3cr3t")
	yml := strings.NewReplacer(
		"token: tok-s3cr3t", "token_file: token",
		"webhook_secret: hook-s3cr3t", "webhook_secret_file: "+filepath.Join(dir, "hook"),
	).Replace(minimalYAML)

	c, err := Load(writeFile(t, dir, "alfred.yaml", yml), []string{
		"ALFRED_DATABASE_URL_FILE=" + dbFile,
		"ALFRED_AGENTS_SCRIPT_API_KEY_FILE=" + keyFile,
	})
	require.NoError(t, err)
	require.Equal(t, "tok-file-s3cr3t", c.Forges[0].Token.Reveal(), "relative to the YAML file, newline trimmed")
	require.Equal(t, "token", c.Forges[0].TokenFile)
	require.Equal(t, "hook-file-s3cr3t", c.Forges[0].WebhookSecret.Reveal(), "CRLF trimmed")
	require.Equal(t, "postgres://file-s3cr3t@db/alfred", c.DatabaseURL.Reveal())
	require.Equal(t, dbFile, c.DatabaseURLFile)
	require.Equal(t, "key-file-s3cr3t", c.Agents[0].APIKey.Reveal())

	t.Run("environment value replaces a YAML file", func(t *testing.T) {
		t.Parallel()
		c, err := Load(writeFile(t, dir, "alfred2.yaml", yml), []string{"ALFRED_FORGES_FORGEJO_TOKEN=tok-env-s3cr3t"})
		require.NoError(t, err)
		require.Equal(t, "tok-env-s3cr3t", c.Forges[0].Token.Reveal())
		require.Empty(t, c.Forges[0].TokenFile)
	})

	t.Run("environment stands in for a file not mounted here", func(t *testing.T) {
		t.Parallel()
		c, err := loadYAML(t, yml, "ALFRED_FORGES_FORGEJO_TOKEN=tok-env-s3cr3t")
		require.NoError(t, err)
		require.Equal(t, "tok-env-s3cr3t", c.Forges[0].Token.Reveal())
	})

	t.Run("missing YAML file", func(t *testing.T) {
		t.Parallel()
		_, err := loadYAML(t, yml) // token_file is relative to another directory now
		require.ErrorContains(t, err, "forges[0].token_file: read secret file")
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := func(t *testing.T) *Config {
		c, err := loadYAML(t, fullYAML)
		require.NoError(t, err)
		return c
	}
	for name, tc := range map[string]struct {
		mutate  func(c *Config)
		wantErr string
	}{
		"no forge":          {func(c *Config) { c.Forges = nil }, "forges: at least one forge is required"},
		"bad forge name":    {func(c *Config) { c.Forges[0].Name = "Forgejo" }, `forges[0].name: "Forgejo" must match`},
		"empty forge name":  {func(c *Config) { c.Forges[0].Name = "" }, `forges[0].name: "" must match`},
		"duplicate forge":   {func(c *Config) { c.Forges[1].Name = "forgejo" }, `forges[1].name: duplicate name "forgejo"`},
		"same env name":     {func(c *Config) { c.Forges[0].Name = "gitlab_main" }, `forges[1].name: "gitlab-main" has the same environment name (GITLAB_MAIN)`},
		"bad kind":          {func(c *Config) { c.Forges[1].Kind = "github" }, `forges[1].kind: "github" is not gitlab or forgejo`},
		"relative base_url": {func(c *Config) { c.Forges[0].BaseURL = "forgejo.example.org" }, "forges[0].base_url: must be an absolute http:// or https:// URL"},
		"ftp base_url":      {func(c *Config) { c.Forges[0].BaseURL = "ftp://x" }, "forges[0].base_url: must be an absolute"},
		"base_url creds":    {func(c *Config) { c.Forges[0].BaseURL = "https://u:pw-s3cr3t@x" }, "forges[0].base_url: must not hold credentials"},
		"no token":          {func(c *Config) { c.Forges[1].Token = "" }, "forges[1].token: required"},
		"no webhook secret": {func(c *Config) { c.Forges[0].WebhookSecret = " " }, "forges[0].webhook_secret: required"},
		"no bot_user":       {func(c *Config) { c.Forges[0].BotUser = "" }, "forges[0].bot_user: required"},
		"sparse escapes": {func(c *Config) { c.Forges[0].Projects = map[string]Project{"big/mono": {Sparse: []string{"../x"}}} },
			`forges[0].projects["big/mono"].sparse[0]: "../x" is not a directory relative to the repository root`},
		"project path": {func(c *Config) { c.Forges[0].Projects = map[string]Project{"/big/mono/": {}} },
			`forges[0].projects["/big/mono/"]: a repository path`},
		"repository path": {func(c *Config) { c.Forges[1].Repositories = []string{"grp/ok", "noslash"} },
			`forges[1].repositories[1]: "noslash" is not a repository path`},
		"bad public_url":    {func(c *Config) { c.PublicURL = "/x" }, "public_url: must be an absolute"},
		"instance upper":    {func(c *Config) { c.Runner.Instance = "Prod" }, `runner.instance: "Prod" must be 1 to 12 lowercase`},
		"instance too long": {func(c *Config) { c.Runner.Instance = "abcdefghijklm" }, `runner.instance: "abcdefghijklm" must be 1 to 12`},
		"instance dash":     {func(c *Config) { c.Runner.Instance = "a-b" }, `runner.instance: "a-b" must be`},
		"empty label":       {func(c *Config) { c.Labels.Blocked = "" }, "labels.blocked: required"},
		"duplicate label":   {func(c *Config) { c.Labels.Done = c.Labels.Blocked }, `labels.done: same label "status::blocked" as labels.blocked`},
		"zero deadline":     {func(c *Config) { c.Lifecycle.QuestionDeadline = 0 }, "lifecycle.question_deadline: must be a positive duration"},
		"negative ci_wait":  {func(c *Config) { c.Lifecycle.CIWait = -time.Second }, "lifecycle.ci_wait: must be a positive duration"},
		"negative attempts": {func(c *Config) { c.Lifecycle.CIFixAttempts = -1 }, "lifecycle.ci_fix_attempts: must be at least 0"},
		"no workers":        {func(c *Config) { c.Workers.Count = 0 }, "workers.count: must be at least 1"},
		// A CLI agent's model endpoint: a URL, never one holding credentials (config check prints it).
		"cli base_url without scheme": {func(c *Config) { c.Agents[0].BaseURL = "gateway.example:8443" }, ".base_url: must be an absolute http:// or https:// URL"},
		"cli base_url credentials":    {func(c *Config) { c.Agents[0].BaseURL = "https://u:pw-s3cr3t@gw/" }, ".base_url: must not hold credentials"},
		"zero lease":                  {func(c *Config) { c.Workers.LeaseTTL = 0 }, "workers.lease_ttl: must be at least 3s"},
		// A lease of nanoseconds would make its heartbeat's ticker panic (a third of it is 0).
		"nanosecond lease":          {func(c *Config) { c.Workers.LeaseTTL = 2 }, "workers.lease_ttl: must be at least 3s"},
		"negative reconcile":        {func(c *Config) { c.Workers.ReconcileInterval = -5 * time.Minute }, "workers.reconcile_interval: must be a positive duration"},
		"negative reconcile batch":  {func(c *Config) { c.Workers.ReconcileBatch = -1 }, "workers.reconcile_batch: must be at least 1"},
		"negative runs":             {func(c *Config) { c.Workers.Runs = -2 }, "workers.runs: must be at least 1"},
		"negative poison attempts":  {func(c *Config) { c.Workers.PoisonAttempts = -3 }, "workers.poison_attempts: must be at least 1"},
		"negative runs per project": {func(c *Config) { c.Workers.RunsPerProject = -1 }, "workers.runs_per_project: must be at least 0"},
		"zero poll":                 {func(c *Config) { c.Workers.PollInterval = 0 }, "workers.poll_interval: must be a positive duration"},
		"root":                      {func(c *Config) { c.Runner.UID = 0 }, "runner.uid: must not be 0"},
		"egress mode":               {func(c *Config) { c.Runner.Egress.Mode = "closed" }, `runner.egress.mode: must be "allowlist" or "open", got "closed"`},
		"egress allowlist on the host network": {func(c *Config) { c.Runner.HostNetwork, c.Runner.Egress.Mode = true, EgressAllowlist },
			"runner.egress.mode: allowlist cannot hold a run on the host network"},
		"egress entry without port": {func(c *Config) { c.Runner.Egress.Allow = []string{"registry.npmjs.org"} },
			`runner.egress.allow[0]: want host:port, got "registry.npmjs.org"`},
		"egress bad wildcard": {func(c *Config) { c.Runner.Egress.Allow = []string{"a.*.org:443"} }, `runner.egress.allow[0]: "a.*.org:443": a wildcard`},
		"host network on kubernetes": {func(c *Config) {
			c.Runner.Runtime, c.Runner.HostNetwork, c.Runner.Egress.Mode = RuntimeKubernetes, true, EgressOpen
			c.Runner.Kubernetes = Kubernetes{Namespace: "alfred-runs", StateClaim: "alfred-state", PullPolicy: "Never"}
		}, "runner.host_network: is refused with the Kubernetes runtime"},
		"kubernetes placement": {func(c *Config) {
			c.Runner.Runtime = RuntimeKubernetes
			c.Runner.Kubernetes = Kubernetes{Namespace: "alfred-runs", StateClaim: "alfred-state", PullPolicy: "Never",
				Tolerations: []map[string]any{{"key": "dedicated", "operater": "Equal"}}}
		}, `runner.kubernetes: tolerations: json: unknown field "operater"`},
		"kubernetes request above its limit": {func(c *Config) {
			c.Runner.Runtime, c.Runner.CPUs = RuntimeKubernetes, 0.5
			c.Runner.Kubernetes = Kubernetes{Namespace: "alfred-runs", StateClaim: "alfred-state", PullPolicy: "Never",
				Requests: map[string]string{"cpu": "501m"}}
		}, "runner.kubernetes.requests.cpu: 501m is above the limit, runner.cpus 0.5"},
		"kubernetes memory request above its limit": {func(c *Config) {
			c.Runner.Runtime, c.Runner.MemoryBytes = RuntimeKubernetes, 256<<20
			c.Runner.Kubernetes = Kubernetes{Namespace: "alfred-runs", StateClaim: "alfred-state", PullPolicy: "Never",
				Requests: map[string]string{"memory": "257Mi"}}
		}, "runner.kubernetes.requests.memory: 257Mi is above the limit, runner.memory_bytes 268435456"},
		"kubernetes request of an unknown resource": {func(c *Config) {
			c.Runner.Runtime = RuntimeKubernetes
			c.Runner.Kubernetes = Kubernetes{Namespace: "alfred-runs", StateClaim: "alfred-state", PullPolicy: "Never",
				Requests: map[string]string{"cpu": "100m", "ephemeral-storage": "1Gi"}}
		}, `runner.kubernetes: requests: "ephemeral-storage" is not cpu or memory`},
		"kubernetes request not a quantity": {func(c *Config) {
			c.Runner.Runtime = RuntimeKubernetes
			c.Runner.Kubernetes = Kubernetes{Namespace: "alfred-runs", StateClaim: "alfred-state", PullPolicy: "Never",
				Requests: map[string]string{"cpu": "half"}}
		}, `runner.kubernetes: requests.cpu: "half"`},
		"kubernetes request of zero": {func(c *Config) {
			c.Runner.Runtime = RuntimeKubernetes
			c.Runner.Kubernetes = Kubernetes{Namespace: "alfred-runs", StateClaim: "alfred-state", PullPolicy: "Never",
				Requests: map[string]string{"memory": "0"}}
		}, `runner.kubernetes: requests.memory: must be positive, got "0"`},
		"negative gid":     {func(c *Config) { c.Runner.GID = -1 }, "runner.gid: must be at least 0"},
		"zero timeout":     {func(c *Config) { c.Runner.Timeout = 0 }, "runner.timeout: must be a positive duration"},
		"zero cpus":        {func(c *Config) { c.Runner.CPUs = 0 }, "runner.cpus: must be positive"},
		"no agents":        {func(c *Config) { c.Agents = nil }, "agents: at least one agent is required"},
		"bad adapter":      {func(c *Config) { c.Agents[1].Adapter = "aider" }, `agents[1].adapter: "aider" is not one of script, claude-code, codex, opencode, copilot, gemini`},
		"script no script": {func(c *Config) { c.Agents[0].Script = "" }, "agents[0].script: required"},
		"no image":         {func(c *Config) { c.Agents[1].Image = "" }, "agents[1].image: required"},
		"undeclared agent": {func(c *Config) { c.Phases["review"] = "codex" }, `phases.review: agent "codex" is not declared`},
		"unknown phase":    {func(c *Config) { c.Phases["deploy"] = "script" }, "phases.deploy: unknown phase"},
		"no default":       {func(c *Config) { delete(c.Phases, "default") }, "phases.default: required"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := valid(t)
			tc.mutate(c)
			err := c.Validate()
			require.ErrorContains(t, err, tc.wantErr)
			require.NotContains(t, err.Error(), marker)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
		})
	}

	t.Run("no database_url selects the embedded store", func(t *testing.T) {
		t.Parallel()
		c := valid(t)
		c.DatabaseURL = ""
		require.NoError(t, c.Validate())
	})

	t.Run("uid 0 from the file is rejected", func(t *testing.T) {
		t.Parallel()
		_, err := loadYAML(t, minimalYAML+"runner:\n  uid: 0\n")
		require.ErrorContains(t, err, "runner.uid: must not be 0")
	})

	t.Run("all problems at once", func(t *testing.T) {
		t.Parallel()
		c := valid(t)
		c.Forges[0].Token, c.Workers.Count = "", 0
		err := c.Validate()
		require.ErrorContains(t, err, "forges[0].token")
		require.ErrorContains(t, err, "workers.count")
	})
}

func TestSecretNeverRenders(t *testing.T) {
	t.Parallel()
	s := Secret("tok-s3cr3t")
	for _, format := range []string{"%s", "%v", "%+v", "%#v", "%q", "%x", "%X", "%d", "%10s", "%T %v"} {
		out := fmt.Sprintf(format, s)
		require.NotContains(t, out, marker, format)
		require.NotContains(t, out, fmt.Sprintf("%x", marker), format)
	}
	require.Equal(t, Redacted, s.String())
	require.Equal(t, `"[redacted]"`, s.GoString())
	require.Empty(t, Secret("").String(), "an unset secret shows as unset")
	b, err := json.Marshal(struct{ T Secret }{s})
	require.NoError(t, err)
	require.JSONEq(t, `{"T":"[redacted]"}`, string(b))
	y, err := s.MarshalYAML()
	require.NoError(t, err)
	require.Equal(t, Redacted, y)
	require.Equal(t, "tok-s3cr3t", s.Reveal())
}

func TestDumpAndLogsRedact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "hook", "hook-file-s3cr3t\n")
	c, err := Load(writeFile(t, dir, "alfred.yaml",
		strings.Replace(fullYAML, "webhook_secret: hook-s3cr3t-gitlab", "webhook_secret_file: hook", 1)), nil)
	require.NoError(t, err)

	dump := c.Dump()
	require.NotContains(t, dump, marker)
	require.Contains(t, dump, `token: "[redacted]"`)
	require.Contains(t, dump, "webhook_secret_file: hook")
	require.Contains(t, dump, "question_deadline: 2h0m0s")
	require.Contains(t, dump, "uid: 65532")

	// The dump is itself a valid configuration apart from the secrets.
	var back Config
	require.NoError(t, decodeYAML([]byte(dump), &back))
	require.Equal(t, c.Workers, back.Workers)
	require.Equal(t, c.Labels, back.Labels)

	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		log := slog.New(h)
		log.Info("config", "config", c, "forge", c.Forges[0], "token", c.Forges[1].Token, "db", c.DatabaseURL)
		log.Info("ptr", "config", *c, "agents", c.Agents)
		log.Info("group", slog.Group("g", slog.Any("secret", c.Agents[1].APIKey)))
	}
	require.NotContains(t, buf.String(), marker)
	require.Contains(t, buf.String(), Redacted)

	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		require.NotContains(t, fmt.Sprintf(format, c), marker, format)
		require.NotContains(t, fmt.Sprintf(format, *c), marker, format)
	}
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	c, err := loadYAML(t, fullYAML)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{
		"postgres://alfred:pw-s3cr3t-db@db:5432/alfred?sslmode=disable",
		"pw-s3cr3t-db",
		"tok-s3cr3t-forgejo", "hook-s3cr3t-forgejo",
		"tok-s3cr3t-gitlab", "hook-s3cr3t-gitlab",
		"key-s3cr3t-claude",
	}, c.Secrets())
	got := c.Secrets()
	for i := 1; i < len(got); i++ {
		require.GreaterOrEqual(t, len(got[i-1]), len(got[i]), "longest first")
	}
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"forgejo": "FORGEJO", "my-forge": "MY_FORGE", "gl_2": "GL_2", "a.b": "A_B"} {
		require.Equal(t, want, EnvName(in))
	}
}

// TestExampleConfig keeps deploy/alfred.example.yaml loadable.
func TestExampleConfig(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/alfred.example.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	for _, name := range []string{"database_url", "forgejo_token", "forgejo_webhook_secret", "gitlab_token", "gitlab_webhook_secret", "anthropic_api_key", "openai_api_key", "admin_token"} {
		writeFile(t, dir, name, name+"-"+marker+"\n")
	}
	yml := strings.ReplaceAll(string(raw), "/run/secrets/", dir+"/")
	c, err := Load(writeFile(t, dir, "alfred.yaml", yml), nil)
	require.NoError(t, err)
	require.Len(t, c.Forges, 2)
	require.NotContains(t, c.Dump(), marker)
	require.Len(t, c.Secrets(), 8)
	require.InDelta(t, 5, *c.For("acme/other").BudgetUSD, 1e-9, "the example's scopes load")
}

func TestSessionsResumeEnabled(t *testing.T) {
	t.Parallel()
	off := false
	s := Sessions{}
	require.True(t, s.ResumeEnabled("acme/shop"), "default on")
	s = Sessions{AgentSessionResume: &off, Overrides: map[string]bool{"acme": true, "acme/legacy": false, "big/sub": true}}
	require.True(t, s.ResumeEnabled("acme/shop"), "organization override")
	require.False(t, s.ResumeEnabled("acme/legacy"), "project override wins over organization")
	require.True(t, s.ResumeEnabled("big/sub/deep/repo"), "closest group")
	require.False(t, s.ResumeEnabled("other/repo"), "default off")
}

func TestCensor(t *testing.T) {
	t.Parallel()
	c, err := loadYAML(t, fullYAML)
	require.NoError(t, err)
	cens := c.Censor()
	basic := func(user, secret string) string {
		return base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))
	}
	for _, leak := range []string{
		"tok-s3cr3t-forgejo", "pw-s3cr3t-db", "key-s3cr3t-claude",
		basic("alfred", "tok-s3cr3t-forgejo"), // Forgejo: the bot's login is the git user
		basic("oauth2", "tok-s3cr3t-gitlab"),  // GitLab: the git user name by convention
		basic("alfred", "pw-s3cr3t-db"),       // the database user
		base64.RawURLEncoding.EncodeToString([]byte("hook-s3cr3t-gitlab")),
	} {
		require.Equal(t, "x [redacted] y", cens.String("x "+leak+" y"), leak)
	}
}

// TestLoadRefusesConfusableSecrets: a secret the censor would confuse with ordinary text (too
// short, a single word, or found in Alfred's own markers and labels) fails the load, and the
// message names the setting and the fix without quoting the value (spec/edge.md, "Secrets the
// censor can tell from text").
func TestLoadRefusesConfusableSecrets(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env     string
		wantKey string
		want    []string
	}{
		"database password a word of the product": {"ALFRED_DATABASE_URL=postgres://alfred:alfred@db:5432/alfred",
			"database_url: the password is shorter than 8 bytes", []string{"ALTER ROLE alfred PASSWORD", "scripts/dev-deps.sh"}},
		"database password a single word": {"ALFRED_DATABASE_URL=postgres://svc:validated@db/alfred",
			"database_url: the password is a single word", []string{"ALTER ROLE svc PASSWORD"}},
		"webhook secret a kind of comment": {"ALFRED_FORGES_FORGEJO_WEBHOOK_SECRET=status",
			"forges[0].webhook_secret: is shorter than 8 bytes", []string{"openssl rand -hex 16"}},
		"token a comment kind": {"ALFRED_FORGES_GITLAB_MAIN_TOKEN=merge_request",
			"forges[1].token: occurs in Alfred's own texts", []string{"openssl rand -hex 16"}},
		"admin token a label name": {"ALFRED_ADMIN_TOKEN=review::pending",
			"admin.token: occurs in Alfred's own texts", []string{"openssl rand -hex 16"}},
		"api key a marker piece": {"ALFRED_AGENTS_CLAUDE_API_KEY=<!-- alfred:key=",
			"agents[1].api_key: occurs in Alfred's own texts", nil},
		"a long word": {"ALFRED_ADMIN_TOKEN=reconciliation",
			"admin.token: is a single word", nil},
		"a word and a space": {"ALFRED_ADMIN_TOKEN=reconciliation ",
			"admin.token: is a single word", nil},
		"a phrase": {"ALFRED_ADMIN_TOKEN=the merge request",
			"admin.token: is made of words only", nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := loadYAML(t, fullYAML, tc.env)
			require.Error(t, err)
			require.ErrorContains(t, err, tc.wantKey)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			_, value, _ := strings.Cut(tc.env, "=")
			if !strings.HasPrefix(tc.env, "ALFRED_DATABASE_URL") {
				require.NotContains(t, err.Error(), value, "the message never quotes the secret")
			}
		})
	}
	for _, ok := range []string{"ALFRED_DATABASE_URL=postgres://alfred:alfred-dev-7Kq2vN9x@127.0.0.1:5432/alfred",
		"ALFRED_FORGES_FORGEJO_WEBHOOK_SECRET=acceptance-webhook-secret", "ALFRED_ADMIN_TOKEN=e2e-admin-token-5c1f"} {
		_, err := loadYAML(t, fullYAML, ok)
		require.NoError(t, err, ok)
	}
}

// TestRuntimeKubernetes: runner.runtime selects the runtime; the Kubernetes runtime needs its
// namespace and state claim, and with the egress allowlist the egress gate's image, takes one
// of the three pull policies and a start timeout that is not negative, and is set from the
// environment as from the file.
func TestRuntimeKubernetes(t *testing.T) {
	t.Parallel()
	c, err := loadYAML(t, minimalYAML, "ALFRED_RUNNER_RUNTIME=kubernetes", "ALFRED_RUNNER_KUBERNETES_NAMESPACE=alfred",
		"ALFRED_RUNNER_KUBERNETES_STATE_CLAIM=alfred-state", "ALFRED_RUNNER_KUBERNETES_EGRESS_GATE_IMAGE=registry.example.org/alfred:1",
		"ALFRED_RUNNER_KUBERNETES_EGRESS_GATE_TARGET=10.0.0.1:443", "ALFRED_RUNNER_KUBERNETES_START_TIMEOUT=15m")
	require.NoError(t, err)
	require.Equal(t, Kubernetes{Namespace: "alfred", StateClaim: "alfred-state", PullPolicy: "IfNotPresent",
		EgressGateImage: "registry.example.org/alfred:1", EgressGateTarget: "10.0.0.1:443", StartTimeout: 15 * time.Minute},
		c.Runner.Kubernetes)
	_, err = loadYAML(t, minimalYAML+"runner:\n  runtime: kubernetes\n  egress: {mode: open}\n  kubernetes: {namespace: a, state_claim: b, start_timeout: -1s}\n")
	require.ErrorContains(t, err, "runner.kubernetes.start_timeout: must not be negative, got -1s")

	_, err = loadYAML(t, minimalYAML, "ALFRED_RUNNER_RUNTIME=kubernetes", "ALFRED_RUNNER_KUBERNETES_NAMESPACE=alfred",
		"ALFRED_RUNNER_KUBERNETES_STATE_CLAIM=alfred-state")
	require.ErrorContains(t, err, "runner.kubernetes.egress_gate_image: is required with runner.egress.mode allowlist")
	_, err = loadYAML(t, minimalYAML, "ALFRED_RUNNER_RUNTIME=kubernetes", "ALFRED_RUNNER_KUBERNETES_NAMESPACE=alfred",
		"ALFRED_RUNNER_KUBERNETES_STATE_CLAIM=alfred-state", "ALFRED_RUNNER_EGRESS_MODE=open")
	require.NoError(t, err, "no gate without an allowlist")
	_, err = loadYAML(t, minimalYAML, "ALFRED_RUNNER_RUNTIME=kubernetes", "ALFRED_RUNNER_KUBERNETES_NAMESPACE=alfred",
		"ALFRED_RUNNER_KUBERNETES_STATE_CLAIM=alfred-state", "ALFRED_RUNNER_KUBERNETES_EGRESS_GATE_IMAGE=alfred:1",
		"ALFRED_RUNNER_KUBERNETES_EGRESS_GATE_TARGET=no-port")
	require.ErrorContains(t, err, "runner.kubernetes.egress_gate_target")

	_, err = loadYAML(t, minimalYAML, "ALFRED_RUNNER_RUNTIME=kubernetes")
	require.ErrorContains(t, err, "runner.kubernetes.namespace")
	require.ErrorContains(t, err, "runner.kubernetes.state_claim")

	_, err = loadYAML(t, minimalYAML+"runner:\n  runtime: kubernetes\n  kubernetes:\n    namespace: a\n    state_claim: b\n    pull_policy: never\n")
	require.ErrorContains(t, err, "runner.kubernetes.pull_policy")

	_, err = loadYAML(t, minimalYAML, "ALFRED_RUNNER_RUNTIME=podman")
	require.ErrorContains(t, err, "runner.runtime")

	c, err = loadYAML(t, minimalYAML, "ALFRED_RUNNER_KUBERNETES_NAMESPACE=ignored")
	require.NoError(t, err, "the docker runtime reads nothing of the kubernetes section")
	require.Equal(t, RuntimeDocker, c.Runner.Runtime)
}

// TestEgressDefaults: the allowlist is on unless the host network is asked for (which no
// allowlist can hold); the placement and the requests of the runs' Pods decode into
// Kubernetes' own types.
func TestEgressDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, EgressAllowlist, Runner{}.EgressMode())
	require.Equal(t, EgressOpen, Runner{HostNetwork: true}.EgressMode())
	require.Equal(t, EgressOpen, Runner{Egress: Egress{Mode: EgressOpen}}.EgressMode())
	c, err := loadYAML(t, strings.Replace(fullYAML, "runner:\n", `runner:
  egress:
    allow: [registry.npmjs.org:443, "*.example.org:443"]
    self_container: alfred-alfred-1
  kubernetes:
    requests: {cpu: 250m, memory: 64Mi}
    tolerations: [{key: dedicated, operator: Equal, value: alfred, effect: NoSchedule}]
    affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}]}}}
`, 1))
	require.NoError(t, err)
	require.Equal(t, []string{"registry.npmjs.org:443", "*.example.org:443"}, c.Runner.Egress.Allow)
	require.Equal(t, "alfred-alfred-1", c.Runner.Egress.SelfContainer)
	tol, aff, err := c.Runner.Kubernetes.Placement()
	require.NoError(t, err)
	require.Equal(t, "NoSchedule", string(tol[0].Effect))
	require.Equal(t, "Exists", string(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Operator))
	req, err := c.Runner.Kubernetes.ResourceRequests()
	require.NoError(t, err)
	require.Equal(t, int64(250), req.Cpu().MilliValue())
	require.Equal(t, int64(64<<20), req.Memory().Value())
	req, err = Kubernetes{}.ResourceRequests()
	require.NoError(t, err)
	require.Nil(t, req, "no requests: each resource at its limit")
	k := Kubernetes{NodeSelector: map[string]string{"kubernetes.io/hostname": "node-a"},
		Tolerations: []map[string]any{{"key": "dedicated", "operator": "Equal", "value": "alfred", "effect": "NoSchedule"}},
		Affinity:    map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Exists"}}}}}}}}
	tol, aff, err = k.Placement()
	require.NoError(t, err)
	require.Equal(t, "alfred", tol[0].Value)
	require.Equal(t, "a", aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key)
}

// Two installations with the same data_dir path (the deploy kits' /var/lib/alfred) on one Docker
// daemon or in one runs' namespace tell their runs apart by runner.instance; without it the
// name data_dir gives is the one every earlier version used.
func TestInstanceOf(t *testing.T) {
	t.Parallel()
	var r Runner
	derived := r.InstanceOf("/var/lib/alfred")
	require.Regexp(t, `^[0-9a-f]{12}$`, derived)
	require.True(t, instanceRE.MatchString(derived), "the derived name has the form runner.instance asks for")
	require.Equal(t, derived, Runner{}.InstanceOf("/var/lib/alfred"), "stable")
	r.Instance = "staging"
	require.Equal(t, "staging", r.InstanceOf("/var/lib/alfred"))
	c := &Config{Runner: Runner{Instance: "abcdefghijkl"}}
	var v validator
	c.validateRunner(&v)
	for _, e := range v {
		require.NotEqual(t, "runner.instance", e.(*FieldError).Key, "12 characters are allowed")
	}
}
