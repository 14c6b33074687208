package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Hostile, end to end on the Forgejo stand-in: the author's description is about 1 MB, far over
// the 65,000 bytes Alfred writes to a Forgejo. The description stored on the forge stays the
// human's text byte for byte; the functional analysis is a comment of its own.
func TestHostileHugeDescriptionEndToEnd(t *testing.T) {
	t.Parallel()
	e := startE2E(t, 2*time.Second)
	ctx := context.Background()
	var human strings.Builder
	human.WriteString("Hi @bot, everything we know about the report.\n\n")
	for i := 0; human.Len() < 1<<20; i++ {
		fmt.Fprintf(&human, "%06d. The export must keep the header row — ünïcödé, 日本語 🙂.\n", i)
	}
	require.NoError(t, e.api.SetIssueBody(ctx, e.issue, human.String()))
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitStatus("status::waiting_validation") // the deadline applied the defaults
	require.Equal(t, human.String(), e.forgejo.IssueBody(e.issue), "the human's text, byte for byte")
	var section string
	for _, c := range e.comments() {
		if k, _, ok := mailbox.ParseMarker(c); ok && k == "section-functional_analysis" {
			section = c
		}
		require.LessOrEqual(t, len(c), mailbox.DefaultForgejoMaxBytes)
	}
	require.Contains(t, section, "| q1. Which separator? | a. Comma | default |")
	e.requireUniqueMarkers()
}

// The development run writes the agent's API key into a .env.
const leakScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
analysis.technical:
  summary: Planned.
  plan: "1. Add export.csv."
development:
  summary: Added the CSV export.
  commit_message: "Add CSV export"
  files:
    export.csv: "date;amount\n"
    .env: "AGENT_API_KEY=` + leakCanary + `\n"
`

// leakCanary is the agent's configured API key: no known format, only the configured list
// finds it.
const leakCanary = "canary-e2e-agent-key-5d1e9b7a"

// Hostile, end to end: an agent commits its own API key. Alfred does not push: the issue is
// blocked with the file and the kind of secret, no comment holds the key, and the remote has no
// branch.
func TestHostileAgentKeyIsNotPushedEndToEnd(t *testing.T) {
	t.Parallel()
	agents, _ := scriptAgents(t, leakScript)
	agents = strings.Replace(agents, "\nphases:", "\n    api_key: "+leakCanary+"\nphases:", 1)
	e := startE2EWith(t, storeSQLite, forge.KindForgejo, "acceptance/sandbox", time.Hour, agents)
	ctx := context.Background()
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitStatus("status::waiting_validation")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated",
		setLabels(e.forgejo.IssueLabels(e.issue)...)))
	e.waitStatus("status::blocked")
	all := strings.Join(e.comments(), "\n")
	require.Contains(t, all, "I did not push the commit: `.env` holds the value of agents[0].api_key")
	require.NotContains(t, all, leakCanary)
	require.Empty(t, e.forgejo.MergeRequests("acceptance/sandbox"))
	out, err := exec.Command("git", "-C", e.bare, "branch", "--list", "agent/*").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "nothing reached the remote")
	out, err = exec.Command("git", "-C", e.bare, "log", "--all", "-p").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), leakCanary)
}
