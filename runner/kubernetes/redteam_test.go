package kubernetes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/runfile"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestRedTeamOutputKubernetes: the red-team attacks on what Alfred reads back, on the test
// cluster through the state claim. A result left as a link to Alfred's own file and one left
// as a FIFO fail the run with the reason (never a hang, nothing of Alfred's read); a flood of
// Pod log after the session line (12 MB: more than the runtime keeps here, 512 KB, and than
// the test cluster's kubelet keeps, two files of 1 MiB) keeps the line, the result after the
// flood, and a bounded memory.
func TestRedTeamOutputKubernetes(t *testing.T) {
	cs, ns := cluster(t)
	root := t.TempDir()
	secret := filepath.Join(t.TempDir(), "alfred.yaml")
	require.NoError(t, os.WriteFile(secret, []byte("forge_token: alfred-own-secret-k8s\n"), 0o600))
	cli := runtimetest.Client(t)
	image := runtimetest.BuildImage(t, t.Context(), cli, "alfred-test/k8s-script:"+kubetest.RandomHex(t, 4),
		"github.com/alfred-bot/alfred/cmd/alfred-script-agent")
	kubetest.ImportImage(t, image)
	agent, err := script.NewFromBytes(image, []byte(fmt.Sprintf(`
development:
  summary: Done.
  commit_message: "feat: x"
  plant: [{path: /alfred/out/result.json, link: %q}]
ci_fix:
  summary: Done.
  commit_message: "fix: x"
  plant: [{path: /alfred/out/result.json, fifo: true}]
review:
  summary: Reviewed after a flood.
  log: ["session: 5e55a0e1-0b7e-4bfb-9a43-3c1a37e1c0de"]
  flood_bytes: %d
`, secret, 12<<20)))
	require.NoError(t, err)
	var seen []byte
	opts := testOptions(ns)
	opts.StateClaim, opts.StateRoot = kubetest.StateClaim(t, cs, ns, root), root
	const logBound = 512 << 10
	rt := kubernetes.New(cs, opts)
	rt.MaxLogBytes = logBound
	ex, err := runner.NewExecutor(runner.Config{Runtime: rt,
		Agents:   map[string]runner.Agent{script.Name: &captureAgent{Agent: agent, stdout: &seen}},
		Bindings: map[phase.Phase]string{phase.Development: script.Name, phase.CIFix: script.Name, phase.Review: script.Name},
		DataDir:  root, UID: runtimetest.ImageUID, GID: runtimetest.ImageGID,
		Timeout: 8 * time.Minute, StopGrace: time.Second})
	require.NoError(t, err)
	wt := filepath.Join(root, "worktree")
	require.NoError(t, os.MkdirAll(wt, 0o777))
	require.NoError(t, os.Chmod(wt, 0o777))
	run := func(runID int64, p phase.Phase) *runner.RunOutcome {
		out, err := ex.Run(t.Context(), runner.RunRequest{MailboxID: 46, RunID: runID, Attempt: 1,
			Input: phase.Input{Phase: p}, Worktree: wt})
		require.NoError(t, err)
		return out
	}

	out := run(1, phase.Development)
	require.Equal(t, runner.StatusFailed, out.Status)
	require.Equal(t, runfile.ReasonLink, runfile.Reason(out.Err), "%v", out.Err)
	require.NotContains(t, fmt.Sprint(out.Err, out.Stdout), "alfred-own-secret-k8s")

	out = run(2, phase.CIFix)
	require.Equal(t, runner.StatusFailed, out.Status)
	require.Equal(t, runfile.ReasonNotRegular, runfile.Reason(out.Err), "%v", out.Err)

	out = run(3, phase.Review)
	require.NoError(t, out.Err)
	require.Equal(t, "Reviewed after a flood.", out.Result.Summary)
	require.Positive(t, out.LogsDropped)
	require.LessOrEqual(t, len(seen), logBound+100)
	require.Contains(t, string(seen[:min(len(seen), 4096)]), "session: 5e55a0e1-0b7e-4bfb-9a43-3c1a37e1c0de")
	require.Contains(t, string(seen[max(0, len(seen)-4096):]), "wrote result.json")
}

// captureAgent keeps the stdout the executor hands the adapter.
type captureAgent struct {
	runner.Agent
	stdout *[]byte
}

func (a *captureAgent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	*a.stdout = append([]byte(nil), stdout...)
	return a.Agent.Result(in, exit, stdout, outDir)
}
