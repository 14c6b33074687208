package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const scopedYAML = `
database_url: postgres://alfred@db/alfred
forges:
  - {name: gl, kind: gitlab, base_url: https://gitlab.example.org, token: t-s3cr3t-1, webhook_secret: w-s3cr3t-1, bot_user: alfred}
agents:
  - {name: script, image: alfred/script-agent:dev, script: /etc/alfred/script.yaml}
  - {name: codex, image: alfred/codex:0.171.0}
phases:
  default: script
lifecycle:
  budget_usd: 5
  question_deadline: 2h
retention_days: 30
sessions:
  overrides:
    acme/legacy: false
scopes:
  acme:
    budget_usd: 2
    branch_prefix: acme-bot/
    auto_merge: true
    shadow: true
    self_review: true
  acme/shop:
    budget_usd: 0.01
    ci_fix_attempts: 1
    phases: {development: codex}
    retention_days: 7
    merge_method: squash
    shadow: false
    self_review: false
  group/sub:
    agent_session_resume: false
`

func TestScopedSettings(t *testing.T) {
	t.Parallel()
	c, err := loadYAML(t, scopedYAML)
	require.NoError(t, err)

	require.Equal(t, []string{
		`branch_prefix = "agent/" (default)`,
		`question_deadline = 2h0m0s (global)`,
		`ci_fix_attempts = 3 (default)`,
		`budget_usd = 5.00 (global)`,
		`agent_session_resume = true (default)`,
		`retention_days = 30 (global)`,
		`auto_merge = false (default)`,
		`merge_method = merge (default)`,
		`shadow = false (default)`,
		`self_review = false (default)`,
		`phases.default = script (global)`,
	}, c.For("").Lines())

	shop := c.For("acme/shop")
	require.Equal(t, []string{
		`branch_prefix = "acme-bot/" (org acme)`,
		`question_deadline = 2h0m0s (global)`,
		`ci_fix_attempts = 1 (project acme/shop)`,
		`budget_usd = 0.01 (project acme/shop)`,
		`agent_session_resume = true (default)`,
		`retention_days = 7 (project acme/shop)`,
		`auto_merge = true (org acme)`,
		`merge_method = squash (project acme/shop)`,
		`shadow = false (project acme/shop)`,
		`self_review = false (project acme/shop)`,
		`phases.default = script (global)`,
		`phases.development = codex (project acme/shop)`,
	}, shop.Lines())
	require.Equal(t, "codex", shop.Agent("development"))
	require.Equal(t, "script", shop.Agent("analysis"))

	other := c.For("acme/other")
	require.InDelta(t, 2, *other.BudgetUSD, 1e-9)
	require.Equal(t, "org acme", other.Sources["budget_usd"])
	require.True(t, other.Shadow, "the organization's shadow mode covers its projects")
	require.Equal(t, "org acme", other.Sources["shadow"])
	require.True(t, other.SelfReview, "the organization's self-review covers its projects")
	require.Equal(t, "org acme", other.Sources["self_review"])

	// Both forges compare paths without case, and name a project as it was created: a scope
	// written in another case applies (else a project meant for shadow mode runs live).
	require.True(t, c.For("Acme/Other").Shadow, "scopes are compared without case")
	require.Equal(t, "org acme", c.For("Acme/Other").Sources["shadow"])
	require.Equal(t, "codex", c.For("ACME/Shop").Agent("development"))
	require.False(t, c.For("Acme/Legacy").SessionResume)
	require.False(t, c.Sessions.ResumeEnabled("Acme/Legacy"))

	require.False(t, c.For("acme/legacy").SessionResume, "sessions.overrides is one more scope source")
	deep := c.For("group/sub/deep/project")
	require.False(t, deep.SessionResume)
	require.Equal(t, "org group/sub", deep.Sources["agent_session_resume"])
}

func TestScopedSettingsAreValidated(t *testing.T) {
	t.Parallel()
	_, err := loadYAML(t, scopedYAML+`
  bad/:
    ci_fix_attempts: -1
    phases: {deploy: script, analysis: nobody}
    budget_usd: -3
    merge_method: fast-forward
    retention_days: 106752
  ACME/shop:
    budget_usd: 1
`)
	require.Error(t, err)
	for _, want := range []string{"scopes.bad/: must be an organization or a project path",
		"scopes.bad/.retention_days: must be between 0 (keep for ever) and 36500 days (100 years), got 106752",
		"scopes.acme/shop: names the same path as scopes.ACME/shop: paths are compared without case",
		"scopes.bad/.ci_fix_attempts", "scopes.bad/.phases.deploy: unknown phase", `scopes.bad/.phases.analysis: unknown agent "nobody"`,
		"scopes.bad/.budget_usd: must not be negative", `scopes.bad/.merge_method: must be merge, squash or rebase, not "fast-forward"`} {
		require.ErrorContains(t, err, want)
	}
}
