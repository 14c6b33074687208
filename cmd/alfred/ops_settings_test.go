package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
)

// A project's own phase binding reaches the machine; the global bindings stay the runner's.
func TestScopedSettingsPassOnlyScopedBindings(t *testing.T) {
	t.Parallel()
	budget := 2.0
	e := config.Effective{BranchPrefix: "bot/", CIFixAttempts: 1, BudgetUSD: &budget,
		Phases:  config.Phases{"default": "claude", "development": "codex", "review": "claude"},
		Sources: map[string]string{"phases.default": "global", "phases.development": "project acme/shop", "phases.review": "org acme"}}
	s := scopedSettings(e)
	require.Equal(t, map[string]string{"development": "codex", "review": "claude"}, s.Agents)
	require.Equal(t, "bot/", s.BranchPrefix)
	require.Equal(t, 1, s.CIFixAttempts)
	require.Same(t, &budget, s.BudgetUSD)

	require.Equal(t, "http://gl.example/g/p/-/merge_requests/4",
		issueURL(&config.Config{Forges: []config.Forge{{Name: "gl", Kind: "gitlab", BaseURL: "http://gl.example"}}})("gl", "g/p", 4, true))
	require.Equal(t, "http://fj.example/o/r/issues/3",
		issueURL(&config.Config{Forges: []config.Forge{{Name: "fj", Kind: "forgejo", BaseURL: "http://fj.example"}}})("fj", "o/r", 3, false))
}
