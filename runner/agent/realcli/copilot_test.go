//go:build realcli

package realcli_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clitest"
)

// TestCopilotCLI runs the real GitHub Copilot CLI (npm @github/copilot; a native binary from
// the optional dependency @github/copilot-linux-x64): a new session with --session-id
// (MARK-ALPHA), a resume with --resume=<that id> (MARK-BETA; the reply must list MARK-ALPHA,
// so the history was sent back), and a resume of an unknown id.
//
// What the CLI needed from the mock and the host:
//   - BYOK only, no GitHub token: COPILOT_PROVIDER_BASE_URL (Config.BaseURL) = the
//     mock's URL + "/v1", COPILOT_PROVIDER_TYPE "openai" with the default wire API
//     ("completions"), COPILOT_PROVIDER_API_KEY, --model mock-model. One
//     POST /v1/chat/completions ("stream": true) per run, served by mockmodel's chat.go;
//     nothing else reached the mock. Without COPILOT_OFFLINE=true (the adapter does not set it)
//     1.0.102 still looked up api.github.com in DNS (strace; there is no DNS on the test host,
//     and the run went on).
//   - the usage file: the adapter writes --usage-output-file to /alfred/out; the host run
//     points it at a temp dir (the recorded Cmd keeps /alfred/out).
func TestCopilotCLI(t *testing.T) {
	bin := cliBin(t, "copilot")
	h := newHost(t)
	a := newCopilot(t, h.mock.URL+"/v1")
	m := Meta{Package: npmVersion(t, "@github/copilot")}
	m.Version = h.version(t, bin, a.Capabilities().VersionCommand, a.ParseVersion)
	t.Logf("Copilot CLI %s (%s); resume verified for the adapter: %t", m.Version, m.Package, a.ResumeVerified(m.Version))

	steps := []struct {
		run, mark, id string
		resume        bool
	}{
		{runFresh, "MARK-ALPHA", copilotSessionID, false},
		{runResumed, "MARK-BETA", copilotSessionID, true},
		{runResumeMiss, "MARK-GAMMA", copilotUnknownID, true},
	}
	for _, st := range steps {
		t.Run(st.run, func(t *testing.T) {
			in := input(st.mark)
			in.SessionName, in.SessionID, in.Resume = sessionName, st.id, st.resume
			inv, err := a.Command(in)
			require.NoError(t, err)
			out := t.TempDir() // /alfred/out
			stdout, stderr, exit := h.run(t, bin, hostOutDir(inv, out))
			for _, r := range h.mock.Requests() {
				require.Equal(t, "POST /v1/chat/completions", r.Method+" "+r.Path, "only model calls reach the mock")
				require.NotContains(t, string(r.Body), copilotKey, "the key is not sent in the body")
				if st.run == runResumeMiss {
					require.NotContains(t, string(r.Body), st.mark, "a refused resume reached the model")
				}
			}
			h.logRequests(t)
			usage, err := os.ReadFile(filepath.Join(out, "copilot-usage.json"))
			if errors.Is(err, os.ErrNotExist) {
				usage, err = nil, nil
			}
			require.NoError(t, err)
			if usage != nil {
				usage = h.sanitize(usage)
				if *clitest.Update {
					require.NoError(t, os.WriteFile(filepath.Join(copilotTestdata, copilotUsageName(m.Version, st.run)), usage, 0o644))
				}
			}
			rm := m
			rm.Input = in
			stdout, rm = h.record(t, copilotTestdata, st.run, rm, inv, stdout, stderr, exit)
			s := checkCopilot(t, st.run, stdout, rm, usage)
			t.Logf("parsed: %+v final %+v", *s, s.Final)
			if st.run == runFresh {
				_, err := os.Stat(filepath.Join(h.home, ".copilot", "session-state", copilotSessionID, "events.jsonl"))
				require.NoError(t, err, "the session is stored under copilot.SessionStatePath")
			}
		})
	}
}

// hostOutDir returns inv with the container's output dir (runner.OutputDir) in the
// --usage-output-file path replaced by out (the prompt keeps /alfred/out).
func hostOutDir(inv runner.Invocation, out string) runner.Invocation {
	inv.Cmd = append([]string(nil), inv.Cmd...)
	for i := 1; i < len(inv.Cmd); i++ {
		if inv.Cmd[i-1] == "--usage-output-file" {
			inv.Cmd[i] = strings.Replace(inv.Cmd[i], runner.OutputDir, out, 1)
		}
	}
	return inv
}
