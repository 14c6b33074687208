//go:build realcli

package realcli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeminiCLI runs the real Gemini CLI (npm @google/gemini-cli): a new session with
// --session-id (MARK-ALPHA), a resume by that id (MARK-BETA; the reply must list MARK-ALPHA,
// so the history was sent back), and a resume of an unknown id.
//
// What the CLI needed from the mock and the host:
//   - GOOGLE_GEMINI_BASE_URL (Config.BaseURL) = the mock's URL without a path; the SDK calls
//     POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse (one per run; the key
//     in x-goog-api-key). Nothing else was requested.
//   - ~/.gemini/settings.json with security.auth.selectedType "gemini-api-key": with a base
//     URL in the env the CLI picks its "gateway" auth type and exits 41 "Invalid auth method
//     selected." (spec/agents.md §5 Auth). HOME is a tmpfs in Alfred's containers, so the image
//     must provide this as system settings (/etc/gemini-cli/settings.json; the CLI ignores a
//     system settings file whose parent directories are writable by others).
//   - a cwd named "workspace" like /workspace (sessions are keyed by the cwd's basename), so
//     the session lands in ~/.gemini/tmp/workspace/chats = gemini.SessionStatePath.
func TestGeminiCLI(t *testing.T) {
	bin := cliBin(t, "gemini")
	h := newHost(t)
	h.work = workspaceWorktree(t, h)
	require.NoError(t, os.MkdirAll(filepath.Join(h.home, ".gemini"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(h.home, ".gemini", "settings.json"),
		[]byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o644))
	a := newGemini(t, h.mock.URL)
	m := Meta{Package: npmVersion(t, "@google/gemini-cli")}
	m.Version = h.version(t, bin, a.Capabilities().VersionCommand, a.ParseVersion)
	t.Logf("Gemini CLI %s (%s); resume verified for the adapter: %t", m.Version, m.Package, a.ResumeVerified(m.Version))

	steps := []struct {
		run, mark, id string
		resume        bool
	}{
		{runFresh, "MARK-ALPHA", geminiSessionID, false},
		{runResumed, "MARK-BETA", geminiSessionID, true},
		{runResumeMiss, "MARK-GAMMA", geminiUnknownID, true},
	}
	for _, st := range steps {
		t.Run(st.run, func(t *testing.T) {
			in := input(st.mark)
			in.SessionName, in.SessionID, in.Resume = sessionName, st.id, st.resume
			inv, err := a.Command(in)
			require.NoError(t, err)
			stdout, stderr, exit := h.run(t, bin, inv)
			if st.run == runResumeMiss {
				for _, r := range h.mock.Requests() {
					require.NotContains(t, string(r.Body), st.mark, "a refused resume reached the model")
				}
			}
			h.logRequests(t)
			rm := m
			rm.Input = in
			stdout, rm = h.record(t, geminiTestdata, st.run, rm, inv, stdout, stderr, exit)
			s := checkGemini(t, st.run, stdout, rm)
			t.Logf("parsed: session %s, text %q, final %+v", s.SessionID, s.FinalText, s.Final)
			if st.run == runFresh {
				chats, err := filepath.Glob(filepath.Join(h.home, ".gemini", "tmp", "workspace", "chats", "session-*-"+geminiSessionID[:8]+".jsonl"))
				require.NoError(t, err)
				require.Len(t, chats, 1, "the session is stored under gemini.SessionStatePath")
			}
		})
	}
}

// workspaceWorktree returns a git worktree named "workspace" (like the container's
// /workspace): Gemini keys sessions by the cwd's basename, opencode projects by the root
// commit.
func workspaceWorktree(t *testing.T, h *host) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "workspace")
	require.NoError(t, os.Rename(h.work, ws))
	return ws
}
