package config

import (
	"maps"
	"slices"

	"github.com/alfred-bot/alfred/runner/phase"
)

// IsAPIMode reports whether adapter is one of API mode's (anthropic-api, openai-api): read-only
// phases through a model provider's API, no container.
func IsAPIMode(adapter string) bool {
	return adapter == AdapterAnthropicAPI || adapter == AdapterOpenAIAPI
}

// validateAPIAgent checks an API-mode agent: a model, a key (openai-api pointed at a base URL
// may go without one: a local server may ask for none), an http(s) base URL, bounds and
// prices that are not negative.
func validateAPIAgent(v *validator, key string, a Agent) {
	v.required(key+".model", a.Model)
	if a.APIKey == "" && (a.Adapter == AdapterAnthropicAPI || a.BaseURL == "") {
		v.add(key+".api_key", "required (or api_key_file)")
	}
	if a.BaseURL != "" {
		v.httpURL(key+".base_url", a.BaseURL)
	}
	v.atLeast(key+".max_turns", int64(a.MaxTurns), 0)
	v.atLeast(key+".max_tokens", a.MaxTokens, 0)
	v.atLeast(key+".max_tool_calls", int64(a.MaxToolCalls), 0)
	for _, m := range slices.Sorted(maps.Keys(a.Prices)) {
		if p := a.Prices[m]; p.InputUSDPerMTok < 0 || p.OutputUSDPerMTok < 0 {
			v.add(key+".prices."+m, "must not be negative")
		}
	}
}

// validateAPIBindings refuses a phase that writes the worktree (development, ci_fix,
// review_fix, conflict_resolution) bound, by its own key or by "default", to an API-mode
// agent: API mode reads the repository through read-only tools and cannot change it. key is
// the YAML path of phases.
func (c *Config) validateAPIBindings(v *validator, key string, phases Phases) {
	for _, ph := range phase.All() {
		if ph.ReadOnly() {
			continue
		}
		name := phases.Agent(string(ph))
		a, ok := c.Agent(name)
		if !ok || !IsAPIMode(a.Adapter) {
			continue
		}
		at := key + "." + string(ph)
		if phases[string(ph)] == "" {
			at = key + "." + PhaseDefault
		}
		v.add(at, "%s writes the worktree, and agent %q is in API mode (%s), which runs only the read-only phases "+
			"(analysis, answer, review, self_review); bind %s to a CLI agent", ph, name, a.Adapter, ph)
	}
}

// scopedPhases is global with a scope's phase bindings over it, as Effective merges them.
func scopedPhases(global, scoped Phases) Phases {
	out := Phases{}
	maps.Copy(out, global)
	maps.Copy(out, scoped)
	return out
}
