// Package apimode is the adapter of API mode: a read-only phase (functional and technical
// analysis, answer, review of a merge request) run in Alfred's own process through a model
// provider's API with the provider's official SDK — no container, no CLI, no session. The
// model sees the repository only through read-only tools Alfred executes itself on the issue's
// worktree (Tools: list a directory, read a file, search text, read the merge request's diff),
// in a tool loop bounded by turns, tokens and the run's wall-clock limit. Its final answer is
// the same phase.Result the CLIs return (spec/result-contract.md), validated the same way.
//
// Two kinds: anthropic-api (the Messages API, github.com/anthropics/anthropic-sdk-go) and
// openai-api (Chat Completions, github.com/openai/openai-go; a base URL points it at any
// OpenAI-compatible server, local model servers included). spec/agents.md, "API mode".
package apimode

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/phase"
)

// The adapter kinds of API mode.
const (
	Anthropic = "anthropic-api"
	OpenAI    = "openai-api"
)

// Defaults of the loop's bounds and the retries, used when the Config field is zero.
const (
	DefaultMaxTurns        = 40
	DefaultMaxTokens       = 2_000_000
	DefaultMaxOutputTokens = 8192
	DefaultMaxToolCalls    = 16
	DefaultMaxRetries      = 2
	DefaultMaxRetryWait    = time.Minute
)

// minTurnOutput is the least output a turn is started with: with fewer tokens left for the
// reply than this (after the estimate of its input), the run stops before the turn.
const minTurnOutput = 256

// Price is what a model costs, in US dollars per million tokens.
type Price = clikit.Price

// Config configures an API-mode adapter.
type Config struct {
	// Kind is Anthropic or OpenAI.
	Kind string
	// Model is the model of every run whose input names none; required.
	Model string
	// APIKey is the provider's key, sent only in the request header by the SDK. Secret.
	APIKey string
	// BaseURL replaces the provider's endpoint ("" for the provider's own): a proxy, or for
	// openai-api an OpenAI-compatible server ("http://127.0.0.1:11434/v1").
	BaseURL string
	// MaxTurns bounds the model calls of one run (DefaultMaxTurns if zero).
	MaxTurns int
	// MaxTokens bounds the input and output tokens of one run, summed over its turns
	// (DefaultMaxTokens if zero).
	MaxTokens int64
	// MaxOutputTokens bounds one reply (DefaultMaxOutputTokens if zero); a turn's max_tokens is
	// less when less of MaxTokens remains.
	MaxOutputTokens int64
	// MaxToolCalls bounds the tool calls executed for one reply (DefaultMaxToolCalls if zero);
	// the calls beyond it are answered as refused, without running them.
	MaxToolCalls int
	// MaxRetries is Alfred's retries of a failed model call (408, 409, 429, 5xx, connection
	// errors); DefaultMaxRetries if zero, none if negative. The SDKs' own retries are off.
	MaxRetries int
	// MaxRetryWait is the longest Retry-After honoured (DefaultMaxRetryWait if zero): a
	// provider asking for a longer wait, or one past the run's deadline, fails the call at
	// once with its words.
	MaxRetryWait time.Duration
	// Prices maps a model to its price; a model without one is unrated (cost unknown).
	Prices map[string]Price
	// HTTPClient carries the requests (nil: the SDK's default).
	HTTPClient *http.Client
}

// Agent is an API-mode adapter; it implements runner.APIAgent.
type Agent struct {
	cfg Config
	// wait waits d or until ctx ends (sleep; tests replace it to see the waits).
	wait func(ctx context.Context, d time.Duration) error
}

var _ runner.APIAgent = (*Agent)(nil)

// New checks cfg and returns the adapter. Errors: an unknown kind, no model, no API key
// (openai-api with a base URL may go without one: a local server may ask for none).
func New(cfg Config) (*Agent, error) {
	switch {
	case cfg.Kind != Anthropic && cfg.Kind != OpenAI:
		return nil, fmt.Errorf("apimode: unknown kind %q (want %s or %s)", cfg.Kind, Anthropic, OpenAI)
	case strings.TrimSpace(cfg.Model) == "":
		return nil, fmt.Errorf("%s: model is required", cfg.Kind)
	case cfg.APIKey == "" && (cfg.Kind == Anthropic || cfg.BaseURL == ""):
		return nil, fmt.Errorf("%s: API key is required", cfg.Kind)
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = DefaultMaxTurns
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.MaxOutputTokens <= 0 {
		cfg.MaxOutputTokens = DefaultMaxOutputTokens
	}
	if cfg.MaxToolCalls <= 0 {
		cfg.MaxToolCalls = DefaultMaxToolCalls
	}
	if cfg.MaxRetryWait <= 0 {
		cfg.MaxRetryWait = DefaultMaxRetryWait
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	return &Agent{cfg: cfg, wait: sleep}, nil
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Name returns the adapter kind.
func (a *Agent) Name() string { return a.cfg.Kind }

// Model returns in.Model, else the configured model.
func (a *Agent) Model(in phase.Input) string { return clikit.Model(in, a.cfg.Model) }

// Command returns runner.ErrAPIMode: API mode runs no container.
func (a *Agent) Command(phase.Input) (runner.Invocation, error) {
	return runner.Invocation{}, runner.ErrAPIMode
}

// Result returns runner.ErrAPIMode: API mode runs no container.
func (a *Agent) Result(phase.Input, runner.ExitState, []byte, string) (*phase.Result, error) {
	return nil, runner.ErrAPIMode
}

// ErrBound is wrapped by a run whose tool loop reached one of its bounds (turns, tokens)
// without a final answer.
var ErrBound = errors.New("the tool loop reached its bound")

// RunAPI runs the tool loop: the prompt, then one model call per turn; the tool calls of a
// reply are executed on the worktree (Tools) and answered, and a reply without tool calls is
// the final answer, read as the result JSON (the whole text or a ```json fence) and validated
// with phase.ValidateResult. Bounds: Config.MaxTurns model calls and Config.MaxTokens tokens
// (ErrBound), Config.MaxToolCalls executed per reply, and ctx. The token bound is checked
// before each turn: the next turn's input is estimated (the first: the prompts and the tools'
// definitions; then the last turn's input and output and the tool results added, about four
// bytes a token) and the turn starts only with at least
// minTurnOutput tokens left for its reply, its max_tokens capped to what remains. A failed
// call is retried (callWithRetry). The report's usage and log cover every turn made, also of
// a failed run.
func (a *Agent) RunAPI(ctx context.Context, run runner.APIRun) (rep runner.APIReport, _ error) {
	in := run.Input
	var log strings.Builder
	defer func() { rep.Log = log.String() }()
	if !in.Phase.ReadOnly() {
		return rep, fmt.Errorf("%s: phase %s writes the worktree; API mode runs read-only phases only", a.cfg.Kind, in.Phase)
	}
	tools, err := OpenTools(run.Worktree, in)
	if err != nil {
		return rep, err
	}
	defer tools.Close()
	system, prompt, err := Prompt(in)
	if err != nil {
		return rep, err
	}
	model := a.Model(in)
	price, rated := a.cfg.Prices[model]
	rep.Usage.Rated = rated
	var conv conversation
	if a.cfg.Kind == Anthropic {
		conv = newAnthropic(a.cfg, model, system, prompt, tools.Specs())
	} else {
		conv = newOpenAI(a.cfg, model, system, prompt, tools.Specs())
	}
	fmt.Fprintf(&log, "API mode: %s, model %s, run %s\n", a.cfg.Kind, model, in.Key)
	// The estimate of the next turn's input tokens, about four bytes a token: the first sends
	// the system prompt, the prompt and the tools' definitions.
	defs, _ := json.Marshal(tools.Specs())
	nextIn := int64(len(system)+len(prompt)+len(defs))/4 + 1
	for {
		if rep.Turns == a.cfg.MaxTurns {
			err := fmt.Errorf("%w: %d turns without a final answer", ErrBound, a.cfg.MaxTurns)
			fmt.Fprintf(&log, "stopped: %v\n", err)
			return rep, err
		}
		left := a.cfg.MaxTokens - rep.Usage.InputTokens - rep.Usage.OutputTokens
		maxOut := min(a.cfg.MaxOutputTokens, left-nextIn)
		if maxOut < min(minTurnOutput, a.cfg.MaxOutputTokens) {
			err := fmt.Errorf("%w: the next turn needs about %d tokens of input and %d for its reply; %d of the run's %d remain",
				ErrBound, nextIn, min(minTurnOutput, a.cfg.MaxOutputTokens), max(left, 0), a.cfg.MaxTokens)
			fmt.Fprintf(&log, "stopped: %v\n", err)
			return rep, err
		}
		rep.Turns++
		r, err := a.callWithRetry(ctx, conv, maxOut, &log)
		rep.Usage.InputTokens += r.in
		rep.Usage.OutputTokens += r.out
		if rated {
			rep.Usage.CostUSD = (float64(rep.Usage.InputTokens)*price.InputUSDPerMTok + float64(rep.Usage.OutputTokens)*price.OutputUSDPerMTok) / 1e6
		}
		if err != nil {
			fmt.Fprintf(&log, "turn %d: %v\n", rep.Turns, err)
			return rep, err
		}
		fmt.Fprintf(&log, "turn %d: %d tokens in, %d out, stop %s, %d tool calls\n", rep.Turns, r.in, r.out, r.stop, len(r.calls))
		if len(r.calls) == 0 {
			res, err := finalResult(in, r)
			if err != nil {
				fmt.Fprintf(&log, "final answer refused: %v\n", err)
				return rep, err
			}
			res.InputTokens, res.OutputTokens = rep.Usage.InputTokens, rep.Usage.OutputTokens
			if rated {
				res.CostUSD = rep.Usage.CostUSD
			}
			rep.Result = res
			fmt.Fprintf(&log, "result: %s\n", oneLine(res.Summary))
			return rep, nil
		}
		// A final answer is taken whatever it cost; another turn only within the token bound.
		if total := rep.Usage.InputTokens + rep.Usage.OutputTokens; total > a.cfg.MaxTokens {
			err := fmt.Errorf("%w: %d tokens used, more than the run's %d", ErrBound, total, a.cfg.MaxTokens)
			fmt.Fprintf(&log, "stopped: %v\n", err)
			return rep, err
		}
		results := make([]toolResult, 0, len(r.calls))
		resultBytes := 0
		for i, c := range r.calls {
			if i >= a.cfg.MaxToolCalls {
				msg := fmt.Sprintf("refused: this reply made %d tool calls, more than the %d one reply may make; this call was not run, ask for it again if it still matters",
					len(r.calls), a.cfg.MaxToolCalls)
				if i == a.cfg.MaxToolCalls {
					fmt.Fprintf(&log, "  %d tool calls beyond the %d of one reply refused\n", len(r.calls)-i, a.cfg.MaxToolCalls)
				}
				results = append(results, toolResult{id: c.id, content: msg, isError: true})
				resultBytes += len(msg)
				continue
			}
			out, err := tools.Call(ctx, c.name, c.args)
			if err != nil {
				fmt.Fprintf(&log, "  %s %s: error: %s\n", oneLine(c.name), oneLine(string(c.args)), oneLine(err.Error()))
				results = append(results, toolResult{id: c.id, content: err.Error(), isError: true})
				resultBytes += len(err.Error())
				continue
			}
			fmt.Fprintf(&log, "  %s %s: %d bytes\n", oneLine(c.name), oneLine(string(c.args)), len(out))
			results = append(results, toolResult{id: c.id, content: out})
			resultBytes += len(out)
		}
		conv.answer(results)
		// The next turn sends this turn's input again, its reply and the results.
		nextIn = r.in + r.out + int64(resultBytes)/4 + 1
	}
}

// callWithRetry makes one model call with max_tokens maxOut, retrying a failure the provider
// may get over (408, 409, 429, 5xx, a connection error) up to Config.MaxRetries times. Before
// a retry it waits what the provider's Retry-After asks, or else 0.5 s doubled at each retry
// up to 8 s; a Retry-After over Config.MaxRetryWait, or one that would end past ctx's
// deadline, fails the call at once with the provider's words (the wait is in them).
func (a *Agent) callWithRetry(ctx context.Context, conv conversation, maxOut int64, log *strings.Builder) (reply, error) {
	for attempt := 0; ; attempt++ {
		r, err := conv.next(ctx, maxOut)
		if err == nil || attempt >= a.cfg.MaxRetries || ctx.Err() != nil || !retryable(err) {
			return r, err
		}
		wait := min(500*time.Millisecond<<attempt, 8*time.Second)
		var pe *ProviderError
		if errors.As(err, &pe) && pe.HasRetryAfter {
			wait = pe.RetryAfter
			if wait > a.cfg.MaxRetryWait {
				fmt.Fprintf(log, "  the provider asks to wait %s, more than the %s honoured\n", wait, a.cfg.MaxRetryWait)
				return r, err
			}
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			fmt.Fprintf(log, "  the provider asks to wait %s, past the run's time limit\n", wait)
			return r, err
		}
		fmt.Fprintf(log, "  %v; retry %d of %d in %s\n", err, attempt+1, a.cfg.MaxRetries, wait)
		if werr := a.wait(ctx, wait); werr != nil {
			return r, err
		}
	}
}

// retryable reports whether err is a failure a retry may get over: HTTP 408, 409, 429 or 5xx,
// or the provider not reached (not ctx's end).
func retryable(err error) bool {
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Status == http.StatusRequestTimeout || pe.Status == http.StatusConflict ||
			pe.Status == http.StatusTooManyRequests || pe.Status >= 500
	}
	var ue *unreachableError
	return errors.As(err, &ue)
}

// finalResult reads the final reply as the run's result.
func finalResult(in phase.Input, r reply) (*phase.Result, error) {
	if r.truncate {
		return nil, fmt.Errorf("%w: the final answer was cut at the output token limit", phase.ErrInvalidResult)
	}
	obj, ok := clikit.JSONObject(r.text)
	if !ok {
		if strings.TrimSpace(r.text) == "" {
			return nil, phase.ErrNoResult
		}
		return nil, fmt.Errorf("%w: the final answer is not a JSON object: %s", phase.ErrInvalidResult, oneLine(r.text))
	}
	return phase.DecodeResult(in, obj)
}

// oneLine shortens s to one line of at most 200 bytes, cut between characters, for the log.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

//go:embed prompt.tmpl
var promptText string

var promptTmpl = template.Must(template.New("prompt").Parse(promptText))

// Prompt renders the system prompt (the role, the tools, the result contract) and the user
// prompt (the issue and what the earlier phases decided) of a run. Errors: a run key without
// instructions, or a phase that writes.
func Prompt(in phase.Input) (system, user string, err error) {
	key := in.Key
	if key == "" {
		key = phase.KeyOf(in.Phase, in.Step)
	}
	task, contract, ok := clikit.Instructions(key)
	if !ok || !in.Phase.ReadOnly() {
		return "", "", fmt.Errorf("apimode: no read-only instructions for run key %q", key)
	}
	var sys, usr bytes.Buffer
	data := struct {
		In             phase.Input
		Key            string
		Task, Contract string
		Diff           bool
	}{in, key, task, contract, in.Review != nil && in.Review.Diff != ""}
	if err := promptTmpl.ExecuteTemplate(&sys, "system", data); err != nil {
		return "", "", fmt.Errorf("apimode: render prompt: %w", err)
	}
	if err := promptTmpl.ExecuteTemplate(&usr, "user", data); err != nil {
		return "", "", fmt.Errorf("apimode: render prompt: %w", err)
	}
	return sys.String(), usr.String(), nil
}

// Check asks the provider whether the key is accepted and the model exists, spending no
// tokens: GET /v1/models/{model} (anthropic-api), GET /models listing the model (openai-api;
// OpenAI-compatible servers implement the list more often than the single model).
func (a *Agent) Check(ctx context.Context) error {
	model := a.cfg.Model
	if a.cfg.Kind == Anthropic {
		c := anthropic.NewClient(anthropicOptions(a.cfg)...)
		if _, err := c.Models.Get(ctx, model, anthropic.ModelGetParams{}); err != nil {
			return providerError("Anthropic", a.cfg.APIKey, err)
		}
		return nil
	}
	c := openaiClient(a.cfg)
	pager := c.Models.ListAutoPaging(ctx)
	for pager.Next() {
		if pager.Current().ID == model {
			return nil
		}
	}
	if err := pager.Err(); err != nil {
		return providerError("OpenAI", a.cfg.APIKey, err)
	}
	return fmt.Errorf("the OpenAI API does not list the model %q", model)
}
