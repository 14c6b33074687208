package main

import (
	"cmp"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// serveConfig is the configuration of an `alfred serve` that the crash, kill matrix,
// hand-over and replica tests run against a Forgejo stand-in (repository owner and bot
// account "bot", the webhook secret liveSecret): one agent for every phase, a short CI
// poll, workers polling every 100 ms. The tests differ only in the fields below.
type serveConfig struct {
	listen, dataDir string
	// forgeURL and forgeToken reach the stand-in (or a proxy in front of it).
	forgeURL, forgeToken string
	// image is the agent's image. script, when set, is the script agent's script file;
	// otherwise the agent is the stand-in claude-code CLI with a test key.
	image, script string
	// ciWait is lifecycle.ci_wait (a Go duration).
	ciWait string
	// workers is workers.count (2 when 0); runs is workers.runs (the default when 0);
	// leaseTTL is workers.lease_ttl, with leaseWhy, when set, the reason as a YAML comment.
	workers, runs int
	leaseTTL      string
	leaseWhy      string
	runner        string // the runner section ("runner: …"), "" for the defaults
	// analyst, when set, is an API-mode agent (a YAML flow mapping with its name "analyst")
	// bound to the analysis; the other phases stay on the agent above.
	analyst string
}

// yaml renders the configuration.
func (c serveConfig) yaml() string {
	agent := fmt.Sprintf("{name: claude, adapter: claude-code, image: %s, api_key: sk-test-key-1234567890}", c.image)
	name := "claude"
	if c.script != "" {
		agent = fmt.Sprintf("{name: script, adapter: script, image: %s, script: %s}", c.image, c.script)
		name = "script"
	}
	workers := fmt.Sprintf("count: %d", cmp.Or(c.workers, 2))
	if c.runs > 0 {
		workers += fmt.Sprintf(", runs: %d", c.runs)
	}
	phases := fmt.Sprintf("{default: %s}", name)
	if c.analyst != "" {
		agent += "\n  - " + c.analyst
		phases = fmt.Sprintf("{default: %s, analysis: analyst}", name)
	}
	lease := ""
	if c.leaseWhy != "" {
		lease = "  # " + c.leaseWhy
	}
	return fmt.Sprintf(`
listen: %s
data_dir: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token: %s, webhook_secret: %s, bot_user: bot}
agents:
  - %s
phases: %s
lifecycle: {ci_wait: %s, ci_poll: 300ms}
workers: {%s, lease_ttl: %s, poll_interval: 100ms}%s
%s
`, c.listen, c.dataDir, c.forgeURL, c.forgeToken, liveSecret, agent, phases, c.ciWait, workers, c.leaseTTL, lease, c.runner)
}

// write writes the configuration to path.
func (c serveConfig) write(tb testing.TB, path string) {
	tb.Helper()
	require.NoError(tb, os.WriteFile(path, []byte(c.yaml()), 0o600))
}
