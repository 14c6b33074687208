package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apiYAML declares a script agent and an API-mode agent; the test appends its phases.
const apiYAML = minimalYAML + `  - name: claude-api
    adapter: anthropic-api
    model: claude-sonnet-4-5
    api_key_file: anthropic.key
    max_turns: 12
    prices:
      claude-sonnet-4-5: {input_usd_per_mtok: 3, output_usd_per_mtok: 15}
`

func loadAPI(t *testing.T, extra string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "anthropic.key", "sk-ant-standin-0123456789\n")
	return Load(writeFile(t, dir, "alfred.yaml", apiYAML+extra), nil)
}

func TestAPIModeBinding(t *testing.T) {
	c, err := loadAPI(t, "phases: {default: script, analysis: claude-api, answer: claude-api, review: claude-api}\n")
	require.NoError(t, err)
	a, ok := c.Agent("claude-api")
	require.True(t, ok)
	require.Equal(t, "sk-ant-standin-0123456789", a.APIKey.Reveal(), "the key comes from its _file")
	require.Equal(t, 12, a.MaxTurns)
	require.Equal(t, Price{InputUSDPerMTok: 3, OutputUSDPerMTok: 15}, a.Prices["claude-sonnet-4-5"])
	require.Contains(t, c.Secrets(), "sk-ant-standin-0123456789", "the key is one the censor removes")
	require.NotContains(t, c.Dump(), "sk-ant-standin")
}

// A phase that writes the worktree bound to an API-mode agent is refused with the reason, by
// its own key, by default, and in a scope.
func TestAPIModeRefusesWritingPhases(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"development": {"phases: {default: script, development: claude-api}\n",
			`phases.development: development writes the worktree, and agent "claude-api" is in API mode (anthropic-api), which runs only the read-only phases (analysis, answer, review, self_review); bind development to a CLI agent`},
		"default": {"phases: {default: claude-api, development: script}\n",
			`phases.default: ci_fix writes the worktree, and agent "claude-api" is in API mode`},
		"scope": {"phases: {default: script}\nscopes:\n  acme/shop:\n    phases: {review_fix: claude-api}\n",
			`scopes.acme/shop.phases.review_fix: review_fix writes the worktree`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadAPI(t, tc.yaml)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestAPIModeAgentValidation(t *testing.T) {
	base := minimalYAML + "phases: {default: script}\n"
	for name, tc := range map[string]struct{ agent, want string }{
		"no model":        {"  - {name: a, adapter: openai-api, api_key: sk-0123456789abc}\n", "agents[0].model: required"},
		"no key":          {"  - {name: a, adapter: anthropic-api, model: m}\n", "agents[0].api_key: required"},
		"bad url":         {"  - {name: a, adapter: openai-api, model: m, api_key: sk-0123456789abc, base_url: ftp://x}\n", "agents[0].base_url"},
		"negative price":  {"  - {name: a, adapter: openai-api, model: m, api_key: sk-0123456789abc, prices: {m: {input_usd_per_mtok: -1}}}\n", "agents[0].prices.m: must not be negative"},
		"negative bounds": {"  - {name: a, adapter: openai-api, model: m, api_key: sk-0123456789abc, max_turns: -2}\n", "agents[0].max_turns"},
	} {
		t.Run(name, func(t *testing.T) {
			yml := strings.Replace(base, "agents:\n", "agents:\n"+tc.agent, 1)
			_, err := Load(writeFile(t, t.TempDir(), "alfred.yaml", yml), nil)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// A local OpenAI-compatible server needs no key and no image.
	yml := strings.Replace(base, "agents:\n", "agents:\n  - {name: local, adapter: openai-api, model: llama3, base_url: http://127.0.0.1:11434/v1}\n", 1)
	_, err := Load(writeFile(t, t.TempDir(), "alfred.yaml", yml), nil)
	require.NoError(t, err)
}
