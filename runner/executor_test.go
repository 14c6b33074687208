package runner_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/phase"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fakeRuntime records what the Executor asks for. Wait returns exit when set, or blocks until
// ctx ends (a hung agent) unless the container was stopped.
type fakeRuntime struct {
	mu        sync.Mutex
	specs     []runner.ContainerSpec
	destroyed []runner.ContainerID
	stopped   map[runner.ContainerID]bool
	hang      bool
	onStart   func(spec runner.ContainerSpec) // e.g. play the agent on the host
	stdout    string
}

func (f *fakeRuntime) Start(_ context.Context, spec runner.ContainerSpec) (runner.Handle, error) {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.mu.Unlock()
	if f.onStart != nil {
		f.onStart(spec)
	}
	return runner.Handle{ID: runner.ContainerID("id-" + spec.Name), Name: spec.Name, Origin: runner.OriginCreated,
		Labels: spec.Labels, Running: true}, nil
}

func (f *fakeRuntime) Adopt(_ context.Context, ref string) (runner.Handle, error) {
	return runner.Handle{}, fmt.Errorf("adopt %s: %w", ref, runner.ErrContainerNotFound)
}

func (f *fakeRuntime) Wait(ctx context.Context, id runner.ContainerID) (runner.ExitState, error) {
	f.mu.Lock()
	stopped := f.stopped[id]
	f.mu.Unlock()
	if stopped {
		return runner.ExitState{Code: 143, Killed: true}, nil
	}
	if f.hang {
		<-ctx.Done()
		return runner.ExitState{}, ctx.Err()
	}
	return runner.ExitState{}, nil
}

func (f *fakeRuntime) Logs(context.Context, runner.ContainerID) ([]byte, []byte, error) {
	return []byte(f.stdout), []byte("err\n"), nil
}

func (f *fakeRuntime) Stop(_ context.Context, id runner.ContainerID, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped == nil {
		f.stopped = map[runner.ContainerID]bool{}
	}
	f.stopped[id] = true
	return nil
}

func (f *fakeRuntime) Destroy(_ context.Context, id runner.ContainerID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed = append(f.destroyed, id)
	return nil
}

func (f *fakeRuntime) List(context.Context, map[string]string) ([]runner.Container, error) {
	return []runner.Container{
		{ID: "a", Name: "alfred-mbx1-r1-development-a1", Labels: map[string]string{runner.LabelManaged: "true", runner.LabelRun: "1"}},
		{ID: "b", Name: "alfred-mbx2-r2-development-a1", Labels: map[string]string{runner.LabelManaged: "true", runner.LabelRun: "2"}},
	}, nil
}

const fakeScript = `
development:
  summary: Done.
  commit_message: "feat: x"
answer:
  summary: Answered.
  answer: "42"
`

type execBundle struct {
	rt       *fakeRuntime
	exec     *runner.Executor
	data     string
	worktree string
}

func setupFake(t *testing.T, mutate func(*runner.Config)) *execBundle {
	t.Helper()
	agent, err := script.NewFromBytes("alfred/script-agent:test", []byte(fakeScript))
	require.NoError(t, err)
	b := &execBundle{rt: &fakeRuntime{}, data: t.TempDir(), worktree: t.TempDir()}
	cfg := runner.Config{
		Runtime:  b.rt,
		Agents:   map[string]runner.Agent{"script": agent},
		Bindings: map[phase.Phase]string{phase.Development: "script", phase.Answer: "script"},
		DataDir:  b.data,
		UID:      65532, GID: 65532,
		Limits:  runner.Limits{MemoryBytes: 2 << 30, NanoCPUs: 2e9, PIDs: 512},
		Timeout: 30 * time.Minute,
		Redact:  func(s string) string { return strings.ReplaceAll(s, "sekrit", "[redacted]") },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	b.exec, err = runner.NewExecutor(cfg)
	require.NoError(t, err)
	return b
}

// playOnHost runs the script agent on the host against the spec's mounts, like the container would.
func playOnHost(t *testing.T) func(runner.ContainerSpec) {
	return func(spec runner.ContainerSpec) {
		src := map[string]string{}
		for _, m := range spec.Mounts {
			src[m.Target] = m.Source
		}
		var out, errOut strings.Builder
		code := script.Play([]string{"-script", filepath.Join(src[runner.InputDir], script.ScriptFile),
			"-input", filepath.Join(src[runner.InputDir], "input.json"),
			"-workspace", src[runner.WorkspaceDir], "-out", src[runner.OutputDir]}, &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
	}
}

func TestExecutorSpecGolden(t *testing.T) {
	t.Parallel()
	b := setupFake(t, nil)
	b.rt.onStart = playOnHost(t)
	b.rt.stdout = "token sekrit here\n"
	out, err := b.exec.Run(t.Context(), runner.RunRequest{
		MailboxID: 12, RunID: 34, Attempt: 2, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Development, Repo: "group/repo", Issue: 7, Title: "Add x"},
	})
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.NoError(t, out.CleanupErr)
	require.Equal(t, runner.StatusSucceeded, out.Status)
	require.Equal(t, "feat: x", out.Result.CommitMessage)
	require.Equal(t, "token [redacted] here\n", out.Stdout)
	require.Len(t, b.rt.specs, 1)
	require.Equal(t, []runner.ContainerID{"id-alfred-mbx12-r34-development-a2"}, b.rt.destroyed)
	require.NoDirExists(t, filepath.Join(b.data, "runs", "alfred-mbx12-r34-development-a2"))

	got, err := json.MarshalIndent(b.rt.specs[0], "", "  ")
	require.NoError(t, err)
	got = []byte(strings.NewReplacer(b.data, "$DATA", b.worktree, "$WORKTREE").Replace(string(got)) + "\n")
	golden := filepath.Join("testdata", "spec_development.golden.json")
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func TestExecutorTimeoutFake(t *testing.T) {
	t.Parallel()
	b := setupFake(t, func(c *runner.Config) { c.Timeout = 50 * time.Millisecond })
	b.rt.hang = true
	out, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Answer}})
	require.NoError(t, err)
	require.Equal(t, runner.StatusTimedOut, out.Status)
	require.ErrorIs(t, out.Err, runner.ErrTimeout)
	require.True(t, out.Exit.Killed)
	require.Len(t, b.rt.destroyed, 1)

	// Caller cancellation: canceled, error returned, container still destroyed.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	b2 := setupFake(t, nil)
	b2.rt.hang = true
	out, err = b2.exec.Run(ctx, runner.RunRequest{MailboxID: 1, RunID: 3, Attempt: 1, Worktree: b2.worktree,
		Input: phase.Input{Phase: phase.Answer}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, runner.StatusCanceled, out.Status)
	require.True(t, out.Exit.Killed)
	require.Len(t, b2.rt.destroyed, 1)
}

func TestExecutorRequestErrors(t *testing.T) {
	t.Parallel()
	b := setupFake(t, nil)
	for name, req := range map[string]runner.RunRequest{
		"no attempt":        {Worktree: b.worktree, Input: phase.Input{Phase: phase.Answer}},
		"relative worktree": {Attempt: 1, Worktree: "wt", Input: phase.Input{Phase: phase.Answer}},
		"unbound phase":     {Attempt: 1, Worktree: b.worktree, Input: phase.Input{Phase: phase.Review}},
	} {
		out, err := b.exec.Run(t.Context(), req)
		require.Error(t, err, name)
		require.Nil(t, out, name)
	}
	require.Empty(t, b.rt.specs)
	_, err := runner.NewExecutor(runner.Config{Runtime: b.rt, DataDir: b.data, UID: 0})
	require.Error(t, err)
}

func TestReapKeepsLive(t *testing.T) {
	t.Parallel()
	b := setupFake(t, nil)
	names, err := b.exec.Reap(t.Context(), func(l map[string]string) bool { return l[runner.LabelRun] == "1" })
	require.NoError(t, err)
	require.Equal(t, []string{"alfred-mbx2-r2-development-a1"}, names)
	require.Equal(t, []runner.ContainerID{"b"}, b.rt.destroyed)
}

func TestTailKeepsEnd(t *testing.T) {
	t.Parallel()
	b := setupFake(t, func(c *runner.Config) { c.MaxOutputBytes = 10 })
	b.rt.onStart = playOnHost(t)
	b.rt.stdout = strings.Repeat("a", 100) + "0123456789"
	out, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 1, RunID: 9, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Answer}})
	require.NoError(t, err)
	require.True(t, out.StdoutTruncated)
	require.True(t, strings.HasSuffix(out.Stdout, "\n0123456789"), out.Stdout)
	require.Equal(t, "42", out.Result.Answer)
}
