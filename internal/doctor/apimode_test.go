package doctor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/runner/agent/apimode"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
)

// An API-mode agent is checked against its provider's models endpoint (no model call, no
// image): a good key and model pass, a wrong key and an unknown model fail the check.
func TestAPIModeAgent(t *testing.T) {
	t.Parallel()
	srv := apimodetest.NewAnthropic(t, "sk-ant-doctor-0123456789", "claude-sonnet-4-5", nil)
	agent := func(key, model string) doctor.Agent {
		a, err := apimode.New(apimode.Config{Kind: apimode.Anthropic, Model: model, APIKey: key, BaseURL: srv.BaseURL(), MaxRetries: -1})
		require.NoError(t, err)
		return doctor.Agent{Name: "claude-api-" + model, Adapter: apimode.Anthropic, Phases: []string{"analysis"}, API: a.Check}
	}
	_, cfg := good(t)
	cfg.Agents = append(cfg.Agents, agent("sk-ant-doctor-0123456789", "claude-sonnet-4-5"),
		agent("sk-ant-wrong-0000000000", "claude-sonnet-4-5"), agent("sk-ant-doctor-0123456789", "claude-nonexistent"))
	r := doctor.Run(t.Context(), cfg)
	out := write(t, r, "api_mode")
	require.Len(t, r.Failed(), 2, out)
	require.Zero(t, srv.Calls(), "no model call")
}
