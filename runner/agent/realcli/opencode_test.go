//go:build realcli

package realcli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/opencode"
)

// TestOpencode runs the real opencode CLI (npm opencode-ai; a native binary from the optional
// dependency opencode-linux-x64): a new session (MARK-ALPHA; opencode assigns the id), a
// resume with --session <id> (MARK-BETA; the reply must list MARK-ALPHA), a resume of an
// unknown id, and a run without a session.
//
// What the CLI needed from the mock and the host:
//   - a custom provider in OPENCODE_CONFIG_CONTENT (Config.ConfigContent, see
//     mockmodel.OpencodeProviderConfig): npm "@ai-sdk/openai-compatible" (bundled in the
//     binary: nothing was fetched), options.baseURL = mock URL + "/v1", options.apiKey
//     "{env:MOCK_MODEL_API_KEY}" (Config.APIKeyEnv, so the key stays in the env only), and
//     -m mock/mock-model. One POST /v1/chat/completions ("stream": true) per run.
//   - OPENCODE_DB is /alfred/home/.opencode-sessions/opencode.db in the container; the host
//     run maps /alfred/home to its HOME. opencode does not create the db's directory (exit 1
//     "unable to open database file"): in Alfred it is the session mount, here it is made.
func TestOpencode(t *testing.T) {
	bin := cliBin(t, "opencode")
	h := newHost(t)
	h.work = workspaceWorktree(t, h)
	require.NoError(t, os.MkdirAll(filepath.Join(h.home, ".opencode-sessions"), 0o700)) // the session mount
	a := newOpencode(t, h.mock.URL)
	m := Meta{Package: npmVersion(t, "opencode-ai")}
	m.Version = h.version(t, bin, a.Capabilities().VersionCommand, a.ParseVersion)
	t.Logf("opencode %s (%s); resume verified for the adapter: %t", m.Version, m.Package, a.ResumeVerified(m.Version))

	session := ""
	steps := []struct {
		run, mark string
		resume    bool
	}{
		{runFresh, "MARK-ALPHA", false},
		{runResumed, "MARK-BETA", true},
		{runResumeMiss, "MARK-GAMMA", true},
	}
	for _, st := range steps {
		t.Run(st.run, func(t *testing.T) {
			in := input(st.mark)
			in.SessionName = sessionName
			switch st.run {
			case runResumed:
				require.NotEmpty(t, session, "the fresh run gave a session id")
				in.SessionID, in.Resume = session, true
			case runResumeMiss:
				in.SessionID, in.Resume = opencodeUnknownID, true
			}
			inv, err := a.Command(in)
			require.NoError(t, err)
			stdout, stderr, exit := h.run(t, bin, hostPaths(inv, h.home))
			if st.run == runResumeMiss {
				for _, r := range h.mock.Requests() {
					require.NotContains(t, string(r.Body), st.mark, "a refused resume reached the model")
				}
			}
			h.logRequests(t)
			rm := m
			rm.Input = in
			stdout, rm = h.record(t, opencodeTestdata, st.run, rm, inv, stdout, stderr, exit)
			s := checkOpencode(t, st.run, stdout, rm, session)
			t.Logf("parsed: %+v", *s)
			if st.run == runFresh {
				session = s.SessionID
				_, err := os.Stat(filepath.Join(h.home, ".opencode-sessions", "opencode.db"))
				require.NoError(t, err, "the session db is in the session mount")
			}
		})
	}

	// A run without a session (no SessionName: no mount, no OPENCODE_DB) in a fresh HOME uses
	// opencode's default database and succeeds. Before the adapter left OPENCODE_DB unset
	// here, this exited 1 "unable to open database file".
	t.Run("no_session", func(t *testing.T) {
		in := input("MARK-DELTA")
		inv, err := a.Command(in)
		require.NoError(t, err)
		for _, e := range inv.Env {
			require.False(t, strings.HasPrefix(e, "OPENCODE_DB="), e)
		}
		nh := *h
		nh.home = t.TempDir()
		stdout, stderr, exit := nh.run(t, bin, hostPaths(inv, nh.home))
		h.logRequests(t)
		require.Equal(t, 0, exit.Code, string(stderr))
		s := opencode.ParseStream(stdout)
		require.Regexp(t, opencodeSessionRE, s.SessionID)
		require.Contains(t, s.FinalText, "MARK-DELTA")
	})
}

// hostPaths returns inv with the container's HOME (runner.HomeDir) in its env replaced by
// home, the HOME of the host run (h.record maps it back).
func hostPaths(inv runner.Invocation, home string) runner.Invocation {
	inv.Env = append([]string(nil), inv.Env...)
	for i, e := range inv.Env {
		inv.Env[i] = strings.ReplaceAll(e, runner.HomeDir, home)
	}
	return inv
}
