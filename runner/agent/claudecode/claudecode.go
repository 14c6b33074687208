// Package claudecode is the "claude-code" agent adapter for Anthropic's Claude Code CLI.
//
// Facts about the CLI come from /work/shared/reference/agent-clis.md, section 1 (Claude Code
// 2.1.332) and its "Adapter notes"; each use below cites the subsection.
//
// The run is headless: `claude -p <prompt> --output-format stream-json --verbose
// --permission-mode bypassPermissions [--model M] [--max-turns N] [--session-id|--resume ID]`
// (§1 Invocation). The prompt is not secret and travels as the -p argument; the API key travels
// only in the environment (ANTHROPIC_API_KEY, §1 Auth and version). The container user is not
// root, so bypassPermissions needs no IS_SANDBOX (§1 Invocation, root trap). The agent writes its
// result to /alfred/out/result.json; the stream on stdout gives the session id, usage and cost.
package claudecode

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/alfred-bot/alfred/runner"
)

// Name is the adapter name used in config.
const Name = "claude-code"

// MaxPromptBytes bounds the -p argument. Linux refuses a single argv string over 128 KiB
// (MAX_ARG_STRLEN); above this size the prompt leaves the long fields (description, CI log,
// comments) in /alfred/in/input.json and tells the agent to read them there.
const MaxPromptBytes = 96 << 10

// Config configures the adapter.
type Config struct {
	// Image has the claude binary (npm @anthropic-ai/claude-code) on PATH and runs as non-root.
	Image string `json:"image" yaml:"image"`
	// Binary is the CLI executable ("claude" if empty).
	Binary string `json:"binary,omitempty" yaml:"binary"`
	// Model is the default --model (alias such as "sonnet" or a full id) when Input.Model is
	// empty; "" leaves the CLI's default (§1 Invocation).
	Model string `json:"model,omitempty" yaml:"model"`
	// MaxTurns adds --max-turns N when > 0; hitting it fails the run with subtype
	// error_max_turns (§1 Failure detection; the flag works although --help omits it).
	MaxTurns int `json:"max_turns,omitempty" yaml:"max_turns"`
	// APIKey is passed as ANTHROPIC_API_KEY (§1 Auth and version). Secret: env only.
	APIKey string `json:"-" yaml:"-"`
	// BaseURL, when set, is passed as ANTHROPIC_BASE_URL (§1 Auth and version) — e.g. a proxy.
	BaseURL string `json:"base_url,omitempty" yaml:"base_url"`
}

// Agent is the Claude Code adapter; it implements runner.Agent.
type Agent struct {
	cfg Config
}

var _ runner.Agent = (*Agent)(nil)

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) {
	if cfg.Image == "" {
		return nil, errors.New("claude-code: image is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("claude-code: API key is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "claude"
	}
	return &Agent{cfg: cfg}, nil
}

// Name returns "claude-code".
func (a *Agent) Name() string { return Name }

// Command compiles the headless invocation (see the package doc). A SessionID in the input
// adds --session-id (new session) or, with Resume, --resume (§1 Sessions: --session-id a second
// time fails with "already in use"). The session id must be a UUID. No secret is in Cmd.
func (a *Agent) Command(in runner.Input) (runner.Invocation, error) {
	prompt, err := Prompt(in)
	if err != nil {
		return runner.Invocation{}, err
	}
	cmd := []string{a.cfg.Binary, "-p", prompt,
		"--output-format", "stream-json", "--verbose", // stream-json needs --verbose (§1 Invocation)
		"--permission-mode", "bypassPermissions"}
	model := in.Model
	if model == "" {
		model = a.cfg.Model
	}
	if model != "" {
		cmd = append(cmd, "--model", model)
	}
	if a.cfg.MaxTurns > 0 {
		cmd = append(cmd, "--max-turns", strconv.Itoa(a.cfg.MaxTurns))
	}
	if in.SessionID != "" {
		if !uuidRe(in.SessionID) {
			return runner.Invocation{}, fmt.Errorf("claude-code: session id %q is not a UUID", in.SessionID)
		}
		if in.Resume {
			cmd = append(cmd, "--resume", in.SessionID)
		} else {
			cmd = append(cmd, "--session-id", in.SessionID)
		}
	}
	env := []string{"ANTHROPIC_API_KEY=" + a.cfg.APIKey}
	if a.cfg.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+a.cfg.BaseURL)
	}
	return runner.Invocation{Image: a.cfg.Image, Cmd: cmd, Env: env}, nil
}

// Result reads the run's outcome. Order of checks:
//
//  1. a resume that found no session (stream result.errors contain "No conversation found with
//     session ID", §1 Failure detection) → *SessionNotFoundError (errors.Is
//     runner.ErrSessionNotFound);
//  2. killed by Alfred → error;
//  3. no final result event, exit ≠ 0 or result.is_error → error with subtype and errors
//     (§1 Failure detection: "exit≠0 or result.is_error means failure");
//  4. a resumed run whose stream reports another session id → error (Adapter notes 2);
//  5. /alfred/out/result.json (validated); if it is missing but the final result text is a
//     JSON object satisfying the contract, that is accepted; otherwise runner.ErrNoResult.
//
// The Result gets SessionID, token counts (input includes cache reads and writes) and
// total_cost_usd from the stream; after a resume that cost is cumulative for the session
// (§1 Output, Adapter notes 6), so callers subtract the previous total.
func (a *Agent) Result(in runner.Input, exit runner.ExitState, stdout []byte, outDir string) (*runner.Result, error) {
	s := ParseStream(stdout)
	if s.ResumeFailed() {
		return nil, &SessionNotFoundError{SessionID: in.SessionID}
	}
	if exit.Killed {
		return nil, fmt.Errorf("claude-code: killed (exit code %d)", exit.Code)
	}
	if s.Final == nil {
		return nil, fmt.Errorf("claude-code: no result event in the output (exit code %d)", exit.Code)
	}
	if exit.Code != 0 || s.Final.IsError {
		return nil, fmt.Errorf("claude-code: run failed (exit code %d, subtype %s, is_error %t): %s",
			exit.Code, s.Final.Subtype, s.Final.IsError, strings.Join(s.Final.Errors, "; "))
	}
	if in.SessionID != "" && s.SessionID != "" && s.SessionID != in.SessionID {
		return nil, fmt.Errorf("claude-code: asked for session %s, the CLI ran session %s", in.SessionID, s.SessionID)
	}
	r, err := runner.ReadResultFile(in, outDir)
	if errors.Is(err, runner.ErrNoResult) {
		if obj, ok := jsonObject(s.Final.Result); ok {
			r, err = runner.DecodeResult(in, obj)
		}
	}
	if err != nil {
		return nil, err
	}
	r.SessionID = s.SessionID
	r.InputTokens = s.Final.Usage.InputTokens + s.Final.Usage.CacheCreationInputTokens + s.Final.Usage.CacheReadInputTokens
	r.OutputTokens = s.Final.Usage.OutputTokens
	r.CostUSD = s.Final.TotalCostUSD
	return r, nil
}

// SessionNotFoundError is returned by Result when `--resume <id>` found no session
// (§1 Failure detection). It matches runner.ErrSessionNotFound with errors.Is.
type SessionNotFoundError struct {
	SessionID string
}

// Error describes the missing session.
func (e *SessionNotFoundError) Error() string {
	return fmt.Sprintf("claude-code: no conversation found with session ID %s", e.SessionID)
}

// Is reports whether target is runner.ErrSessionNotFound.
func (e *SessionNotFoundError) Is(target error) bool { return target == runner.ErrSessionNotFound }

// jsonObject extracts a JSON object from the final text: the whole text, or the body of a
// ```json fence.
func jsonObject(text string) ([]byte, bool) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```json")
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimSuffix(strings.TrimSpace(t), "```")
		t = strings.TrimSpace(t)
	}
	if !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
		return nil, false
	}
	return []byte(t), true
}

func uuidRe(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

//go:embed prompt.tmpl
var promptText string

var promptTmpl = template.Must(template.New("prompt").Parse(promptText))

// tasks are the per-phase instructions; contracts the result fields per phase.
var tasks = map[string]string{
	"analysis.functional": "Analyse the issue functionally: restate what is asked, the expected behaviour and the acceptance criteria, and list what is out of scope. Read the code as needed but change nothing. Where the request is ambiguous, ask clarification questions, each with 2 to 4 options and a default; ask none if it is clear.",
	"analysis.technical":  "Write a technical plan for the analysed and decided request: the files and functions to change, the approach, the tests to add, and the risks. Change nothing.",
	"development":         "Implement the validated plan in /workspace, with tests. Keep the change focused. Run the project's tests if you can.",
	"ci_fix":              "The CI pipeline failed on the branch. Find the cause in the log excerpts and the code, and fix it in /workspace.",
	"review_fix":          "Address the review comments above by changing the code in /workspace.",
	"conflict_resolution": "The branch conflicts with its base. Resolve the conflicts in /workspace, keeping the intent of both sides.",
	"answer":              "Answer the question asked in the latest comment, based on the code. Change nothing.",
	"review":              "Review the change on this branch against the plan: correctness, tests, style. Change nothing.",
}

var contracts = map[string]string{
	"analysis.functional": `{"summary": "...", "understanding": "what is asked, in your words", "expected_behaviour": "...", "acceptance_criteria": ["..."], "out_of_scope": ["..."],
 "questions": [{"id": "q1", "title": "...", "context": "...", "options": [{"id": "a", "label": "...", "description": "..."}, {"id": "b", "label": "...", "description": "..."}], "default": "a"}]}
("understanding" is required; "questions" may be empty; each question has 2 to 4 options and a default naming one of them.)`,
	"analysis.technical":  `{"summary": "...", "plan": "the technical plan, in Markdown"} ("plan" is required.)`,
	"development":         `{"summary": "...", "commit_message": "a conventional commit message"} ("commit_message" is required.)`,
	"ci_fix":              `{"summary": "...", "commit_message": "..."}`,
	"review_fix":          `{"summary": "...", "commit_message": "..."}`,
	"conflict_resolution": `{"summary": "...", "commit_message": "..."}`,
	"answer":              `{"summary": "...", "answer": "the answer to post, in Markdown"} ("answer" is required.)`,
	"review":              `{"summary": "the review, in Markdown"}`,
}

// Prompt renders the prompt of a run from prompt.tmpl: the issue, decisions, analysis, plan,
// CI log and comments as present, the phase's task, and the result contract. Over
// MaxPromptBytes it renders a brief variant pointing to /alfred/in/input.json.
func Prompt(in runner.Input) (string, error) {
	key := in.Key
	if key == "" {
		key = runner.KeyOf(in.Phase, in.Step)
	}
	task, ok := tasks[key]
	if !ok {
		return "", fmt.Errorf("claude-code: no instructions for run key %q", key)
	}
	data := struct {
		In       runner.Input
		Key      string
		Task     string
		Contract string
		ReadOnly bool
		Brief    bool
	}{in, key, task, contracts[key], in.Phase.ReadOnly(), false}
	var buf bytes.Buffer
	if err := promptTmpl.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("claude-code: render prompt: %w", err)
	}
	if buf.Len() > MaxPromptBytes {
		data.Brief = true
		buf.Reset()
		if err := promptTmpl.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("claude-code: render prompt: %w", err)
		}
		if buf.Len() > MaxPromptBytes {
			return "", fmt.Errorf("claude-code: prompt is %d bytes even without long fields (max %d)", buf.Len(), MaxPromptBytes)
		}
	}
	return buf.String(), nil
}

// Keys lists the run keys the adapter has instructions for, sorted.
func Keys() []string {
	keys := make([]string, 0, len(tasks))
	for k := range tasks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
