package script_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/phase"
)

// The hostile steps do what they say: the log lines first, then the flood of the asked size,
// then the result, and the plants replace it (a link, a FIFO) at their container paths.
func TestHostileSteps(t *testing.T) {
	t.Parallel()
	dir, ws, out := t.TempDir(), t.TempDir(), t.TempDir()
	data, err := json.Marshal(phase.Input{Phase: phase.Development})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "input.json"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, script.ScriptFile), []byte(`
development:
  summary: x
  log: ["session: abc"]
  flood_bytes: 10050
  plant:
    - {path: /alfred/out/result.json, link: /etc/passwd}
    - {path: /alfred/out/usage.json, fifo: true}
    - {path: /workspace/.git, link: /}
    - {path: /workspace/.git/config, content: "[core]\n"}
    - {path: /workspace/forged/.git/HEAD, content: "ref: refs/heads/main\n"}
`), 0o644))
	var stdout, stderr bytes.Buffer
	code := script.Play([]string{"-script", filepath.Join(dir, script.ScriptFile), "-input", filepath.Join(dir, "input.json"),
		"-workspace", ws, "-out", out}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	lines := strings.SplitN(stdout.String(), "\n", 3)
	require.Equal(t, "session: abc", lines[1], "the log line comes before the flood")
	require.GreaterOrEqual(t, stdout.Len(), 10050)
	require.Less(t, stdout.Len(), 10050+500)
	target, err := os.Readlink(filepath.Join(out, phase.ResultFile))
	require.NoError(t, err)
	require.Equal(t, "/etc/passwd", target)
	st, err := os.Lstat(filepath.Join(out, "usage.json"))
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeNamedPipe)
	config, err := os.ReadFile(filepath.Join(ws, ".git", "config"))
	require.NoError(t, err, "the link planted first is replaced by a directory for the file")
	require.Equal(t, "[core]\n", string(config))
	head, err := os.ReadFile(filepath.Join(ws, "forged", ".git", "HEAD"))
	require.NoError(t, err)
	require.Equal(t, "ref: refs/heads/main\n", string(head))
}
