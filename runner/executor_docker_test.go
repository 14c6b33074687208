package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

const dockerScript = `
analysis.functional:
  summary: Tried to edit during analysis.
  understanding: Should not get here.
  files:
    sneaky.txt: "analysis must not write\n"
analysis.technical:
  summary: Planned.
  plan: "1. do it"
  log: ["reading the code"]
development:
  summary: Implemented.
  commit_message: "feat: hello"
  files:
    hello.txt: "hello\n"
    pkg/deep/file.go: "package deep\n"
ci_fix:
  summary: Slow fix.
  sleep_seconds: 60
  files:
    late.txt: "too late\n"
answer:
  summary: Forgot the result.
  no_result: true
review:
  summary: Reviewed.
`

var runSeq atomic.Int64

func init() { runSeq.Store(time.Now().UnixNano() % 1e9 * 100) }

type dockerBundle struct {
	cli   *client.Client
	rt    *docker.Runtime
	agent runner.Agent
	image string
}

func setupDocker(tb testing.TB, ctx context.Context, scriptText string) *dockerBundle {
	tb.Helper()
	cli := runtimetest.Client(tb)
	image := runtimetest.BuildImageOnce(tb, ctx, cli, fmt.Sprintf("alfred-test/script-agent:runner-%d-%d", os.Getpid(), runSeq.Add(1)),
		"github.com/alfred-bot/alfred/cmd/alfred-script-agent")
	agent, err := script.NewFromBytes(image, []byte(scriptText))
	require.NoError(tb, err)
	return &dockerBundle{cli: cli, rt: docker.New(cli), agent: agent, image: image}
}

func (b *dockerBundle) executor(tb testing.TB, timeout time.Duration) *runner.Executor {
	tb.Helper()
	bind := map[phase.Phase]string{}
	for _, p := range []phase.Phase{phase.Analysis, phase.Development, phase.CIFix, phase.Answer, phase.Review} {
		bind[p] = script.Name
	}
	ex, err := runner.NewExecutor(runner.Config{
		Runtime:   b.rt,
		Agents:    map[string]runner.Agent{script.Name: b.agent},
		Bindings:  bind,
		DataDir:   tb.TempDir(),
		UID:       runtimetest.ImageUID,
		GID:       runtimetest.ImageGID,
		Limits:    runner.Limits{MemoryBytes: 256 << 20, NanoCPUs: 1e9, PIDs: 128},
		Timeout:   timeout,
		StopGrace: time.Second,
	})
	require.NoError(tb, err)
	return ex
}

// worktree returns a directory owned by the container user with one file.
func worktree(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "README"), []byte("hi\n"), 0o644))
	if os.Geteuid() == 0 {
		require.NoError(tb, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, runtimetest.ImageUID, runtimetest.ImageGID)
		}))
	} else {
		require.NoError(tb, os.Chmod(dir, 0o777))
	}
	return dir
}

func TestExecutorDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel) // not defer: the parallel subtests run after this function returns
	b := setupDocker(t, ctx, dockerScript)
	ex := b.executor(t, time.Minute)

	// run executes one phase and checks that nothing is left behind.
	run := func(t *testing.T, ex *runner.Executor, in phase.Input) (*runner.RunOutcome, string) {
		t.Helper()
		wt := worktree(t)
		runID := runSeq.Add(1)
		out, err := ex.Run(ctx, runner.RunRequest{MailboxID: 99, RunID: runID, Attempt: 1, Input: in, Worktree: wt})
		require.NoError(t, err)
		require.NoError(t, out.CleanupErr)
		left, err := b.rt.List(ctx, map[string]string{runner.LabelManaged: "true", runner.LabelRun: strconv.FormatInt(runID, 10)})
		require.NoError(t, err)
		require.Empty(t, left, "container not removed")
		require.NoDirExists(t, ex.RunDir(out.Name))
		return out, wt
	}

	t.Run("AnalysisCannotWriteWorkspace", func(t *testing.T) {
		t.Parallel()
		out, wt := run(t, ex, phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional})
		require.Equal(t, runner.StatusFailed, out.Status)
		require.Equal(t, script.ExitWriteFiles, out.Exit.Code)
		require.Contains(t, out.Stderr, "read-only file system")
		require.NoFileExists(t, filepath.Join(wt, "sneaky.txt"))
	})

	t.Run("AnalysisResult", func(t *testing.T) {
		t.Parallel()
		out, _ := run(t, ex, phase.Input{Phase: phase.Analysis, Step: phase.StepTechnical, Repo: "g/r", Issue: 3})
		require.NoError(t, out.Err)
		require.Equal(t, runner.StatusSucceeded, out.Status)
		require.Equal(t, "1. do it", out.Result.Plan)
		require.Contains(t, out.Stdout, "analysis.technical attempt 1, issue g/r#3")
		require.Contains(t, out.Stdout, "reading the code")
	})

	t.Run("DevelopmentWritesFiles", func(t *testing.T) {
		t.Parallel()
		out, wt := run(t, ex, phase.Input{Phase: phase.Development})
		require.NoError(t, out.Err)
		require.Equal(t, runner.StatusSucceeded, out.Status)
		require.Equal(t, "feat: hello", out.Result.CommitMessage)
		got, err := os.ReadFile(filepath.Join(wt, "pkg", "deep", "file.go"))
		require.NoError(t, err)
		require.Equal(t, "package deep\n", string(got))
		require.FileExists(t, filepath.Join(wt, "hello.txt"))
	})

	t.Run("TimeoutKills", func(t *testing.T) {
		t.Parallel()
		short := b.executor(t, 2*time.Second)
		began := time.Now()
		out, wt := run(t, short, phase.Input{Phase: phase.CIFix})
		require.Equal(t, runner.StatusTimedOut, out.Status)
		require.ErrorIs(t, out.Err, runner.ErrTimeout)
		require.True(t, out.Exit.Killed)
		require.Less(t, time.Since(began), 20*time.Second)
		require.NoFileExists(t, filepath.Join(wt, "late.txt"))
	})

	t.Run("MissingResult", func(t *testing.T) {
		t.Parallel()
		out, _ := run(t, ex, phase.Input{Phase: phase.Answer})
		require.Equal(t, runner.StatusFailed, out.Status)
		require.Equal(t, 0, out.Exit.Code)
		require.ErrorIs(t, out.Err, phase.ErrNoResult)
	})

	t.Run("MissingImage", func(t *testing.T) {
		t.Parallel()
		agent, err := script.NewFromBytes("alfred-test/absent:nope", []byte(dockerScript))
		require.NoError(t, err)
		ex2, err := runner.NewExecutor(runner.Config{Runtime: b.rt, Agents: map[string]runner.Agent{"script": agent},
			Bindings: map[phase.Phase]string{phase.Review: "script"}, DataDir: t.TempDir(), UID: 65532, GID: 65532})
		require.NoError(t, err)
		_, err = ex2.Run(ctx, runner.RunRequest{MailboxID: 99, RunID: runSeq.Add(1), Attempt: 1,
			Input: phase.Input{Phase: phase.Review}, Worktree: worktree(t)})
		require.ErrorIs(t, err, runner.ErrImageNotFound)
	})
}
