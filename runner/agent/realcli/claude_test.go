//go:build realcli

package realcli_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/agent/claudecode"
)

// TestClaudeCode runs the real Claude Code CLI: a new session with --session-id (MARK-ALPHA),
// a resume by that id (MARK-BETA; the reply must list MARK-ALPHA, so the history was sent
// back), and a resume of an unknown id.
func TestClaudeCode(t *testing.T) {
	bin := cliBin(t, "claude")
	h := newHost(t)
	a := newClaude(t, h.mock.URL)
	m := Meta{Package: npmVersion(t, "@anthropic-ai/claude-code")}
	m.Version = h.version(t, bin, a.Capabilities().VersionCommand, a.ParseVersion)
	t.Logf("Claude Code %s (%s); resume verified for the adapter: %t", m.Version, m.Package, a.ResumeVerified(m.Version))
	var extra []string
	if os.Getuid() == 0 {
		// Alfred's containers run as non-root; on a root host bypassPermissions needs this
		// (spec/agents.md §1 Invocation, root trap).
		extra = append(extra, "IS_SANDBOX=1")
	}

	steps := []struct {
		run   string
		mark  string
		id    string
		resum bool
	}{
		{runFresh, "MARK-ALPHA", claudeSessionID, false},
		{runResumed, "MARK-BETA", claudeSessionID, true},
		{runResumeMiss, "MARK-GAMMA", claudeUnknownID, true},
	}
	var prev *claudecode.Stream
	for _, st := range steps {
		t.Run(st.run, func(t *testing.T) {
			in := input(st.mark)
			in.SessionID, in.Resume = st.id, st.resum
			if !st.resum {
				in.SessionName = sessionName
			}
			inv, err := a.Command(in)
			require.NoError(t, err)
			stdout, stderr, exit := h.run(t, bin, inv, extra...)
			h.logRequests(t)
			rm := m
			rm.Input = in
			stdout, rm = h.record(t, claudeTestdata, st.run, rm, inv, stdout, stderr, exit)
			s := checkClaude(t, st.run, stdout, rm, prev)
			if st.run == runFresh {
				prev = s
			}
			if s.Final != nil {
				in, out := s.Final.Tokens()
				t.Logf("parsed: session %s, subtype %s, text %q, tokens %d/%d, cost %g", s.SessionID, s.Final.Subtype, s.Final.Result, in, out, s.Final.TotalCostUSD)
			}
		})
	}
}
