// Package agent builds agent adapters by kind: the one place that maps an adapter kind from
// the configuration ("claude-code") to its package (runner/agent/claudecode). The adapters
// themselves live below it, one package per coding-agent CLI, on the shared base in
// runner/agent/internal/clikit; the facts they rely on are in spec/agents.md.
package agent

import (
	"fmt"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/apimode"
	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/agent/codex"
	"github.com/alfred-bot/alfred/runner/agent/copilot"
	"github.com/alfred-bot/alfred/runner/agent/gemini"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/agent/opencode"
	"github.com/alfred-bot/alfred/runner/agent/script"
)

// Config configures an adapter of any kind: Image, Model, APIKey (secret), BaseURL,
// APIKeyEnv, Script and the rest; each kind reads the fields it needs (see each package's
// Config).
type Config = clikit.Config

// Price is a model's price in an API-mode adapter's Config.Prices, US dollars per million
// tokens.
type Price = clikit.Price

// builders maps each adapter kind to its constructor.
var builders = map[string]func(Config) (runner.Agent, error){
	script.Name: func(c Config) (runner.Agent, error) {
		return script.New(script.Config{Image: c.Image, ScriptFile: c.Script})
	},
	claudecode.Name:   func(c Config) (runner.Agent, error) { return claudecode.New(c) },
	codex.Name:        func(c Config) (runner.Agent, error) { return codex.New(c) },
	opencode.Name:     func(c Config) (runner.Agent, error) { return opencode.New(c) },
	copilot.Name:      func(c Config) (runner.Agent, error) { return copilot.New(c) },
	gemini.Name:       func(c Config) (runner.Agent, error) { return gemini.New(c) },
	apimode.Anthropic: func(c Config) (runner.Agent, error) { return newAPI(apimode.Anthropic, c) },
	apimode.OpenAI:    func(c Config) (runner.Agent, error) { return newAPI(apimode.OpenAI, c) },
}

// newAPI builds an API-mode adapter (no image, no container) from cfg.
func newAPI(kind string, c Config) (runner.Agent, error) {
	return apimode.New(apimode.Config{Kind: kind, Model: c.Model, APIKey: c.APIKey, BaseURL: c.BaseURL,
		MaxTurns: c.MaxTurns, MaxTokens: c.MaxTokens, MaxToolCalls: c.MaxToolCalls, Prices: c.Prices})
}

// Kinds lists the adapter kinds New builds: script, claude-code, codex, opencode, copilot,
// gemini, and API mode's anthropic-api and openai-api.
func Kinds() []string {
	return []string{script.Name, claudecode.Name, codex.Name, opencode.Name, copilot.Name, gemini.Name,
		apimode.Anthropic, apimode.OpenAI}
}

// New builds the adapter of kind from cfg. Errors: an unknown kind, or the adapter's own (no
// image, no API key, an unreadable or invalid script).
func New(kind string, cfg Config) (runner.Agent, error) {
	build, ok := builders[kind]
	if !ok {
		return nil, fmt.Errorf("unknown adapter %q", kind)
	}
	return build(cfg)
}
