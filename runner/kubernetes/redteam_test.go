package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	k8s "k8s.io/client-go/kubernetes"

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
// flood, and a bounded memory. The flood waits until the runtime follows the log, and the end
// until the kubelet has rotated the session line out of the file it serves: what the kubelet
// rotates away before a follow opens cannot be had (see the runtime's follow), and which
// comes first is not this test's to decide.
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
  flood_after_file: flood
  flood_bytes: %d
  wait_for_file: rotated
`, secret, 12<<20)))
	require.NoError(t, err)
	var seen []byte
	opts := testOptions(ns)
	opts.StateClaim, opts.StateRoot = kubetest.StateClaim(t, cs, ns, root), root
	const logBound = 512 << 10
	rt := kubernetes.New(cs, opts)
	rt.MaxLogBytes = logBound
	started := make(chan runner.Handle, 3)
	ex, err := runner.NewExecutor(runner.Config{Runtime: startSignal{Runtime: rt, started: started},
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

	// The review run: its flood once the log is followed, its end once the kubelet has rotated
	// the session line away from the file it serves. Runs 1 and 2 have ended: the next Start is
	// the review's.
	for len(started) > 0 {
		<-started
	}
	steps := make(chan error, 1)
	go func() { steps <- releaseReview(t.Context(), rt, cs, ns, root, started) }()
	out = run(3, phase.Review)
	require.NoError(t, <-steps)
	require.NoError(t, out.Err)
	require.Equal(t, "Reviewed after a flood.", out.Result.Summary)
	require.Positive(t, out.LogsDropped)
	require.LessOrEqual(t, len(seen), logBound+100)
	require.Contains(t, string(seen[:min(len(seen), 4096)]), "session: 5e55a0e1-0b7e-4bfb-9a43-3c1a37e1c0de")
	require.Contains(t, string(seen[max(0, len(seen)-4096):]), "wrote result.json")
}

// startSignal hands every Handle its Runtime's Start returns to started (never blocking: a
// full channel drops it).
type startSignal struct {
	runner.Runtime
	started chan<- runner.Handle
}

func (s startSignal) Start(ctx context.Context, spec runner.ContainerSpec) (runner.Handle, error) {
	h, err := s.Runtime.Start(ctx, spec)
	if err == nil {
		select {
		case s.started <- h:
		default:
		}
	}
	return h, err
}

// releaseReview releases the held review run (the script's flood_after_file and
// wait_for_file) in order: the flood once rt follows the run's log, the end once the log the
// kubelet serves has lost the session line (its rotation; it looks every 10 s). Each wait is
// bounded by reviewStepWait; one that runs out still releases the run and says what it waited
// for.
func releaseReview(ctx context.Context, rt *kubernetes.Runtime, cs k8s.Interface, ns, root string, started <-chan runner.Handle) error {
	var h runner.Handle
	select {
	case h = <-started:
	case <-time.After(reviewStepWait):
		return fmt.Errorf("the review run did not start within %s", reviewStepWait)
	case <-ctx.Done():
		return ctx.Err()
	}
	release := func(name string) error {
		return os.WriteFile(filepath.Join(root, "runs", h.Name, "out", name), nil, 0o644)
	}
	var errs []error
	if !waitUntil(ctx, func() bool { return rt.Following(h.ID) }) {
		errs = append(errs, fmt.Errorf("the runtime did not follow pod %s's log within %s", h.Name, reviewStepWait))
	}
	errs = append(errs, release("flood"))
	rotated := waitUntil(ctx, func() bool {
		head, err := cs.CoreV1().Pods(ns).GetLogs(h.Name, &corev1.PodLogOptions{
			Container: kubernetes.ContainerName, LimitBytes: new(int64(4096))}).DoRaw(ctx)
		return err == nil && !strings.Contains(string(head), "session: ")
	})
	if !rotated {
		errs = append(errs, fmt.Errorf("the kubelet did not rotate pod %s's log within %s", h.Name, reviewStepWait))
	}
	errs = append(errs, release("rotated"))
	return errors.Join(errs...)
}

// reviewStepWait bounds each of releaseReview's waits: the kubelet's log manager looks every
// 10 s, and a loaded machine delays it.
const reviewStepWait = 3 * time.Minute

// waitUntil checks cond every 100 ms until it holds (true), or reviewStepWait or ctx ends
// (false).
func waitUntil(ctx context.Context, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, reviewStepWait)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
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
