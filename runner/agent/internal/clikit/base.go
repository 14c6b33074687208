package clikit

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Config configures an agent adapter, as the operator writes it (the agents section of the
// configuration). Every adapter reads the fields it needs and ignores the others.
type Config struct {
	// Image has the CLI on PATH and runs as non-root.
	Image string `json:"image" yaml:"image"`
	// Binary is the CLI executable (CLI.Binary if empty).
	Binary string `json:"binary,omitempty" yaml:"binary"`
	// Model is the default model when Input.Model is empty; "" leaves the CLI's default.
	Model string `json:"model,omitempty" yaml:"model"`
	// APIKey is the credential the CLI authenticates with, passed only in the environment
	// (CLI.KeyEnv, or as the adapter's CLI.Env says). Secret.
	APIKey string `json:"-" yaml:"-"`
	// BaseURL points the CLI at another model endpoint (a proxy); how is the adapter's.
	BaseURL string `json:"base_url,omitempty" yaml:"base_url"`
	// VerifiedVersions lists further CLI versions (exact, "2.1.400") on which resume by id was
	// checked by the operator; see CLI.Verified.
	VerifiedVersions []string `json:"verified_versions,omitempty" yaml:"verified_versions"`
	// MaxTurns bounds the agent's turns when > 0 (claude-code: --max-turns).
	MaxTurns int `json:"max_turns,omitempty" yaml:"max_turns"`
	// APIKeyEnv names the variable the provider key is passed in (opencode, which talks to
	// several providers).
	APIKeyEnv string `json:"api_key_env,omitempty" yaml:"api_key_env"`
	// ConfigContent is inline CLI configuration passed in the environment (opencode:
	// OPENCODE_CONFIG_CONTENT). Env only, since it may hold credentials.
	ConfigContent string `json:"-" yaml:"-"`
	// ProviderType is the bring-your-own-key provider type (copilot: COPILOT_PROVIDER_TYPE).
	ProviderType string `json:"provider_type,omitempty" yaml:"provider_type"`
	// Script is the host path of the scenario file (the script adapter only).
	Script string `json:"script_file,omitempty" yaml:"script_file"`
	// MaxTokens bounds the tokens of one run, input and output summed over its turns (API
	// mode).
	MaxTokens int64 `json:"max_tokens,omitempty" yaml:"max_tokens"`
	// MaxToolCalls bounds the tool calls run for one reply (API mode; apimode's default when
	// zero).
	MaxToolCalls int `json:"max_tool_calls,omitempty" yaml:"max_tool_calls"`
	// Prices maps a model to its price (API mode); a model without one is unrated.
	Prices map[string]Price `json:"prices,omitempty" yaml:"prices"`
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputUSDPerMTok  float64 `json:"input_usd_per_mtok" yaml:"input_usd_per_mtok"`
	OutputUSDPerMTok float64 `json:"output_usd_per_mtok" yaml:"output_usd_per_mtok"`
}

// PromptArg stands in CLI.Args for the prompt argument; without it the prompt is the last
// argument.
const PromptArg = "\x00prompt"

// CLI declares what differs from one coding-agent CLI to the next, for Agent: its name,
// executable, command line, environment, sessions, and how its output is read. Each adapter
// fills one from the facts in spec/agents.md.
type CLI struct {
	// Name is the adapter kind used in configuration ("claude-code").
	Name string
	// Binary is the default executable ("claude").
	Binary string
	// Args follow the executable, with PromptArg where the prompt goes.
	Args []string
	// ModelFlag passes the model ("--model", "-m").
	ModelFlag string
	// Extra returns adapter-specific arguments, placed after the model (nil: none).
	Extra func(cfg Config, in phase.Input) []string
	// Sessions says how a session is created and resumed on the command line.
	Sessions Sessions
	// Tail are arguments after the session ones (before a trailing prompt).
	Tail []string
	// KeyEnv is the variable APIKey is passed in, and BaseURLEnv the one BaseURL is, when Env
	// is nil; BaseURLEnv "" means BaseURL is not passed in the environment.
	KeyEnv, BaseURLEnv string
	// Env returns the run's environment instead of KeyEnv and BaseURLEnv (nil: not used).
	Env func(cfg Config, in phase.Input) []string
	// Egress returns the provider hosts ("host:port") the CLI calls with cfg when BaseURL is
	// empty (spec/agents.md); with BaseURL, the run may reach the BaseURL's host only.
	Egress func(cfg Config) []string
	// SessionStatePath, CallerChosenID and CumulativeUsage are the runner.Capabilities of the
	// CLI's sessions.
	SessionStatePath string
	CallerChosenID   bool
	CumulativeUsage  bool
	// Verified is the set of versions on which resume by exact id is verified.
	Verified Versions
	// ResumeMiss is how the CLI refuses a resume.
	ResumeMiss ResumeMiss
	// Read reads a run's output (the stream on stdout, stderr, files in outDir).
	Read func(in phase.Input, exit runner.ExitState, stdout, stderr []byte, outDir string) Reading
}

// Sessions is how a CLI's sessions appear on its command line. A CLI with caller-chosen ids
// (NewFlag set) gets session arguments whenever the input names a session id; a CLI that
// assigns ids gets them only to resume (and NameFlag for a new session).
type Sessions struct {
	// NewFlag creates a session with the caller's id ("--session-id"); "" when the CLI
	// assigns ids.
	NewFlag string
	// NameFlag names a new session ("-n", "--title"); "" for none.
	NameFlag string
	// ResumeFlag resumes by exact id: followed by the id ("--resume", "--session", the Codex
	// subcommand "resume"), or joined to it when it ends in "=" ("--resume=").
	ResumeFlag string
	// ValidID checks a session id before it is passed; IDKind describes a valid one for the
	// error ("a UUID").
	ValidID func(id string) bool
	IDKind  string
}

// args returns the session arguments of in. Errors: a session id that fails ValidID.
func (s Sessions) args(agent string, in phase.Input) ([]string, error) {
	check := func() error {
		if !s.ValidID(in.SessionID) {
			return fmt.Errorf("%s: session id %q is not %s", agent, in.SessionID, s.IDKind)
		}
		return nil
	}
	resume := func() []string {
		if strings.HasSuffix(s.ResumeFlag, "=") {
			return []string{s.ResumeFlag + in.SessionID}
		}
		return []string{s.ResumeFlag, in.SessionID}
	}
	switch {
	case s.NewFlag != "" && in.SessionID == "":
		return nil, nil
	case s.NewFlag != "" || in.Resume:
		if err := check(); err != nil {
			return nil, err
		}
		if in.Resume {
			return resume(), nil
		}
		args := []string{s.NewFlag, in.SessionID}
		if s.NameFlag != "" && in.SessionName != "" {
			args = append(args, s.NameFlag, in.SessionName)
		}
		return args, nil
	case s.NameFlag != "" && in.SessionName != "":
		return []string{s.NameFlag, in.SessionName}, nil
	}
	return nil, nil
}

// ResumeMiss is how a CLI refuses `resume <unknown id>` (spec/agents.md, "Adapter notes" 3).
type ResumeMiss struct {
	// Text is the part of the stderr line that says so.
	Text string
	// ExitCode is the refusal's exit code.
	ExitCode int
	// OnlyWithExitCode counts the stderr line only with ExitCode and no kill (Gemini's 42 is
	// any input error).
	OnlyWithExitCode bool
	// Inferred, when set, is the signal of a refusal inferred without stderr: a resume that
	// exited ExitCode, not killed, before the stream Started.
	Inferred string
}

// Reading is what an adapter's CLI.Read found in a run's output.
type Reading struct {
	// Started is true when the stream shows the CLI got going (an event, a thread or session
	// id): a resume refusal is inferred only without it.
	Started bool
	// ResumeRefused is true when the stream itself reports a refused resume.
	ResumeRefused bool
	// SessionID is the session the stream reports; OtherSessionID another one it also reports
	// (the silent new session).
	SessionID, OtherSessionID string
	// Failure is why the run failed by the CLI's own rules (exit code, error events, no final
	// event); nil when it succeeded.
	Failure error
	// FinalText is the agent's final text, a fallback for a missing result.json.
	FinalText string
	// InputTokens, OutputTokens and CostUSD (US dollars) are the usage the CLI reported.
	InputTokens, OutputTokens int64
	CostUSD                   float64
}

// Agent is a CLI adapter: a CLI declaration with its Config. It implements
// runner.SessionAgent and runner.StderrResulter; each adapter package names it as its own
// Agent type.
type Agent struct {
	cli *CLI
	cfg Config
}

var (
	_ runner.SessionAgent   = (*Agent)(nil)
	_ runner.StderrResulter = (*Agent)(nil)
	_ runner.EgressAgent    = (*Agent)(nil)
)

// New checks cfg for cli and returns the adapter. Errors: no image, or no API key.
func New(cli *CLI, cfg Config) (*Agent, error) {
	if cfg.Image == "" {
		return nil, fmt.Errorf("%s: image is required", cli.Name)
	}
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("%s: API key is required", cli.Name)
	}
	if cfg.Binary == "" {
		cfg.Binary = cli.Binary
	}
	return &Agent{cli: cli, cfg: cfg}, nil
}

// Name returns the adapter kind (CLI.Name).
func (b *Agent) Name() string { return b.cli.Name }

// EgressHosts returns the host:port pairs a run of this adapter must reach (runner.EgressAgent):
// the host of Config.BaseURL when set (port 443 for https, 80 for http, unless it names one),
// else the CLI's provider hosts (CLI.Egress). A BaseURL that does not parse gives none.
func (b *Agent) EgressHosts() []string {
	if b.cfg.BaseURL != "" {
		if hp := URLHostPort(b.cfg.BaseURL); hp != "" {
			return []string{hp}
		}
		return nil
	}
	if b.cli.Egress == nil {
		return nil
	}
	return b.cli.Egress(b.cfg)
}

// URLHostPort returns the host:port of an absolute http(s) URL, the port from its scheme when
// it names none; "" when u is not one.
func URLHostPort(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Hostname() == "" || (p.Scheme != "http" && p.Scheme != "https") {
		return ""
	}
	port := p.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[p.Scheme]
	}
	return net.JoinHostPort(p.Hostname(), port)
}

// Capabilities declares resumable sessions stored under CLI.SessionStatePath, the CLI's id
// model and usage reporting, and `<binary> --version` as the version command.
func (b *Agent) Capabilities() runner.Capabilities {
	return runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  b.cli.SessionStatePath,
		CallerChosenID:    b.cli.CallerChosenID,
		CumulativeUsage:   b.cli.CumulativeUsage,
		VersionCommand:    []string{b.cfg.Binary, "--version"},
	}
}

// ParseVersion extracts the first major.minor.patch from `<binary> --version` output.
func (b *Agent) ParseVersion(output string) (string, error) { return ParseVersion(b.cli.Name, output) }

// ResumeVerified reports whether version is in CLI.Verified or Config.VerifiedVersions.
func (b *Agent) ResumeVerified(version string) bool {
	return b.cli.Verified.VerifiedWith(version, b.cfg.VerifiedVersions)
}

// Command compiles the headless invocation: the executable, CLI.Args with the prompt, the
// model, CLI.Extra, the session arguments (CLI.Sessions), CLI.Tail and, when Args has no
// PromptArg, the prompt last. Secrets travel only in the environment. Errors: the prompt cannot
// be rendered, or the session id is not valid for the CLI.
func (b *Agent) Command(in phase.Input) (runner.Invocation, error) {
	prompt, err := Prompt(b.cli.Name, in)
	if err != nil {
		return runner.Invocation{}, err
	}
	sess, err := b.cli.Sessions.args(b.cli.Name, in)
	if err != nil {
		return runner.Invocation{}, err
	}
	cmd, placed := []string{b.cfg.Binary}, false
	for _, a := range b.cli.Args {
		if a == PromptArg {
			a, placed = prompt, true
		}
		cmd = append(cmd, a)
	}
	if model := Model(in, b.cfg.Model); model != "" {
		cmd = append(cmd, b.cli.ModelFlag, model)
	}
	if b.cli.Extra != nil {
		cmd = append(cmd, b.cli.Extra(b.cfg, in)...)
	}
	cmd = append(append(cmd, sess...), b.cli.Tail...)
	if !placed {
		cmd = append(cmd, prompt)
	}
	var env []string
	if b.cli.Env != nil {
		env = b.cli.Env(b.cfg, in)
	} else {
		env = []string{b.cli.KeyEnv + "=" + b.cfg.APIKey}
		if b.cli.BaseURLEnv != "" && b.cfg.BaseURL != "" {
			env = append(env, b.cli.BaseURLEnv+"="+b.cfg.BaseURL)
		}
	}
	return runner.Invocation{Image: b.cfg.Image, Cmd: cmd, Env: env}, nil
}

// Result is ResultStderr without stderr: a resume refusal is then recognised in the stream or
// inferred from its shape (ResumeMiss.Inferred).
func (b *Agent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	return b.ResultStderr(in, exit, stdout, nil, outDir)
}

// ResultStderr reads the run's outcome, in this order:
//
//  1. a refused resume (Reading.ResumeRefused; with Resume, stderr holding ResumeMiss.Text, or
//     the refusal inferred without stderr) → *SessionNotFoundError (errors.Is
//     runner.ErrSessionNotFound);
//  2. killed by Alfred → error (some CLIs exit 0 on SIGTERM, so Killed is trusted, not the code);
//  3. Reading.Failure → that error;
//  4. a run that named its session (a chosen id, or a resume) whose stream reports another →
//     *MismatchError (the silent new session, spec/agents.md "Adapter notes" 2);
//  5. /alfred/out/result.json, or the final text as a JSON object (ReadResult); otherwise
//     phase.ErrNoResult.
//
// The Result gets the stream's session id and usage.
func (b *Agent) ResultStderr(in phase.Input, exit runner.ExitState, stdout, stderr []byte, outDir string) (*phase.Result, error) {
	r := b.cli.Read(in, exit, stdout, stderr, outDir)
	if err := b.resumeMiss(in, exit, stderr, r); err != nil {
		return nil, err
	}
	if exit.Killed {
		return nil, fmt.Errorf("%s: killed (exit code %d)", b.cli.Name, exit.Code)
	}
	if r.Failure != nil {
		return nil, r.Failure
	}
	named := in.Resume || (b.cli.CallerChosenID && in.SessionID != "")
	if named && (r.SessionID != in.SessionID || r.OtherSessionID != "") {
		got := r.SessionID
		if got == in.SessionID {
			got = r.OtherSessionID
		}
		return nil, &MismatchError{Agent: b.cli.Name, Requested: in.SessionID, Got: got}
	}
	res, err := ReadResult(in, outDir, r.FinalText)
	if err != nil {
		return nil, err
	}
	res.SessionID = r.SessionID
	res.InputTokens, res.OutputTokens, res.CostUSD = r.InputTokens, r.OutputTokens, r.CostUSD
	return res, nil
}

// resumeMiss returns the *SessionNotFoundError of a refused resume, nil otherwise.
func (b *Agent) resumeMiss(in phase.Input, exit runner.ExitState, stderr []byte, r Reading) error {
	m := b.cli.ResumeMiss
	miss := func(signal string) error {
		return &SessionNotFoundError{Agent: b.cli.Name, SessionID: in.SessionID, Signal: signal}
	}
	if !in.Resume || (r.Failure == nil && exit.Code == 0) {
		// Only a resume can be refused, and a run that succeeded by the CLI's own rules was
		// not: whatever its stderr says (an MCP server's "Session not found") or its answer.
		return nil
	}
	if r.ResumeRefused {
		return miss(m.Text)
	}
	coded := exit.Code == m.ExitCode && !exit.Killed
	if m.OnlyWithExitCode && !coded {
		return nil
	}
	if l := StderrLine(stderr, m.Text); l != "" {
		return miss(l)
	}
	if m.Inferred != "" && stderr == nil && coded && !r.Started {
		return miss(m.Inferred)
	}
	return nil
}
