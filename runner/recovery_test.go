package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// memLog is an in-memory runner.ContainerLog (internal/store/postgres is the real one, tested there).
type memLog struct {
	mu   sync.Mutex
	rows []runner.ContainerRecord
	seen int
}

func (l *memLog) InsertContainer(_ context.Context, r *runner.ContainerRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.rows {
		if x.ContainerName == r.ContainerName {
			return runner.ErrNameConflict
		}
	}
	r.ID, r.Status, r.CreatedAt = int64(len(l.rows)+1), runner.ContainerStarting, time.Now()
	l.rows = append(l.rows, *r)
	return nil
}

func (l *memLog) row(id int64) *runner.ContainerRecord {
	for i := range l.rows {
		if l.rows[i].ID == id {
			return &l.rows[i]
		}
	}
	return nil
}

func (l *memLog) ContainerStarted(_ context.Context, id int64, c runner.ContainerID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.row(id)
	r.ContainerID, r.Status = string(c), runner.ContainerReady
	return nil
}

func (l *memLog) ContainerSeen(context.Context, int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	return nil
}

func (l *memLog) EndContainer(_ context.Context, id int64, st runner.ContainerStatus, msg string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.row(id)
	r.Status, r.ErrorMessage = st, msg
	return nil
}

func (l *memLog) LiveContainers(context.Context) ([]runner.ContainerRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []runner.ContainerRecord
	for _, r := range l.rows {
		if r.Status.Live() {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l *memLog) RunContainers(_ context.Context, run int64) ([]runner.ContainerRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []runner.ContainerRecord
	for _, r := range l.rows {
		if r.RunID == run {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l *memLog) get(i int) runner.ContainerRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rows[i]
}

// Executor.Run records the container's life: starting before the create, ready with the id
// after the start, stopped after the teardown; a failed start ends the row in error.
func TestExecutorRecordsItsContainer(t *testing.T) {
	t.Parallel()
	xl := &memLog{}
	b := setupFake(t, func(c *runner.Config) { c.ContainerLog = xl })
	b.rt.onStart = playOnHost(t)
	out, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 4, RunID: 9, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Answer, Branch: "agent/issue-4"}})
	require.NoError(t, err)
	require.NoError(t, out.RecordErr)
	require.Len(t, xl.rows, 1)
	r := xl.get(0)
	require.Equal(t, runner.ContainerStopped, r.Status)
	require.Equal(t, string(out.ID), r.ContainerID)
	require.Equal(t, out.Name, r.ContainerName)
	require.Equal(t, int64(9), r.RunID)
	require.Equal(t, int64(4), r.MailboxID)
	require.Equal(t, "script", r.Adapter)
	require.Equal(t, b.worktree, r.WorkspacePath)
	require.Equal(t, "agent/issue-4", r.Branch)
	require.Contains(t, r.ErrorMessage, "succeeded, exit 0")
	require.Equal(t, []runner.ContainerID{out.ID}, b.rt.destroyed, "the created container is torn down")

	// The same name again: refused before any container is created.
	_, err = b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 4, RunID: 9, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Answer}})
	require.ErrorIs(t, err, runner.ErrNameConflict)
	require.Len(t, b.rt.specs, 1)
}

// failingStart is a runtime whose create is refused (another process holds the name).
type failingStart struct{ fakeRuntime }

func (f *failingStart) Start(context.Context, runner.ContainerSpec) (runner.Handle, error) {
	return runner.Handle{}, fmt.Errorf("create: %w", runner.ErrNameConflict)
}

func TestExecutorStartFailureEndsTheRowAndDestroysNothing(t *testing.T) {
	t.Parallel()
	xl := &memLog{}
	rt := &failingStart{}
	b := setupFake(t, func(c *runner.Config) { c.ContainerLog, c.Runtime = xl, rt })
	_, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Answer}})
	require.ErrorIs(t, err, runner.ErrNameConflict)
	require.Equal(t, runner.ContainerError, xl.get(0).Status)
	require.Empty(t, rt.destroyed, "a failed create removes nothing")
}

// Managed containers without a live executor row are orphans; a live row keeps its container.
func TestRemoveOrphans(t *testing.T) {
	t.Parallel()
	xl := &memLog{}
	b := setupFake(t, func(c *runner.Config) { c.ContainerLog = xl })
	require.NoError(t, xl.InsertContainer(t.Context(), &runner.ContainerRecord{RunID: 1, ContainerName: "alfred-mbx1-r1-development-a1"}))
	names, err := b.exec.RemoveOrphans(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"alfred-mbx2-r2-development-a1"}, names)
	require.Equal(t, []runner.ContainerID{"b"}, b.rt.destroyed)
}

const reattachScript = `
development:
  summary: Implemented.
  commit_message: "feat: hello"
  files:
    hello.txt: "hello\n"
  sleep_seconds: 3
  per_attempt:
    "2": {sleep_seconds: 0}
    "3": {sleep_seconds: 120}
`

// crashed sets up what a process killed during a run leaves: the run directory, the container
// (started as Executor.Run starts it) and a live executor row. attempt picks the script's sleep.
func crashed(t *testing.T, b *dockerBundle, ex *runner.Executor, xl *memLog, attempt int, ready bool) (runner.ContainerRecord, runner.Handle, string) {
	t.Helper()
	runID := runSeq.Add(1)
	in := phase.Input{Phase: phase.Development, Key: "development", Attempt: attempt}
	name := runner.ContainerName(98, runID, in.Phase, attempt)
	wt := worktree(t)
	inv, err := b.agent.Command(in)
	require.NoError(t, err)
	runDir := ex.RunDir(name)
	inDir, outDir := filepath.Join(runDir, "in"), filepath.Join(runDir, "out")
	require.NoError(t, os.MkdirAll(inDir, 0o755))
	require.NoError(t, os.MkdirAll(outDir, 0o777))
	require.NoError(t, os.Chmod(outDir, 0o777))
	data, _ := json.Marshal(in)
	require.NoError(t, os.WriteFile(filepath.Join(inDir, "input.json"), data, 0o644))
	for f, content := range inv.Files {
		require.NoError(t, os.WriteFile(filepath.Join(inDir, f), content, 0o644))
	}
	rec := &runner.ContainerRecord{RunID: runID, MailboxID: 98, ContainerName: name, Adapter: b.agent.Name(), WorkspacePath: wt}
	require.NoError(t, xl.InsertContainer(t.Context(), rec))
	h, err := b.rt.Start(t.Context(), runner.ContainerSpec{Name: name, Image: inv.Image, Cmd: inv.Cmd,
		Env: []string{"HOME=" + runner.HomeDir}, WorkingDir: runner.WorkspaceDir, User: runtimetest.ImageUser,
		Mounts: []runner.Mount{{Source: wt, Target: runner.WorkspaceDir}, {Source: inDir, Target: runner.InputDir, ReadOnly: true},
			{Source: outDir, Target: runner.OutputDir}},
		Labels: map[string]string{runner.LabelManaged: "true", runner.LabelMailbox: "98",
			runner.LabelRun: strconv.FormatInt(runID, 10), runner.LabelPhase: "development"},
		Limits: runner.Limits{MemoryBytes: 256 << 20, NanoCPUs: 1e9, PIDs: 128}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.rt.Destroy(context.Background(), h.ID) })
	if ready {
		require.NoError(t, xl.ContainerStarted(t.Context(), rec.ID, h.ID))
		rec.ContainerID, rec.Status = string(h.ID), runner.ContainerReady
	}
	return *rec, h, wt
}

// Reattach with real Docker: a container that exited while Alfred was down is collected; one
// still running is left alone without wait and waited for with it; a vanished one ends its
// row in error with the reason; a row that never became ready is found by name; the run's
// timeout still applies to a reattached container. Collected containers and run directories
// are removed.
func TestReattachDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	b := setupDocker(t, ctx, reattachScript)
	xl := &memLog{}
	ex, err := runner.NewExecutor(runner.Config{Runtime: b.rt, Agents: map[string]runner.Agent{b.agent.Name(): b.agent},
		Bindings: map[phase.Phase]string{phase.Development: b.agent.Name()}, DataDir: t.TempDir(),
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID, Timeout: time.Minute, StopGrace: time.Second,
		ContainerLog: xl, Heartbeat: 100 * time.Millisecond})
	require.NoError(t, err)
	requireCollected := func(t *testing.T, rec runner.ContainerRecord, h runner.Handle, r *runner.Reattached, wt string) {
		t.Helper()
		require.False(t, r.Gone)
		require.False(t, r.StillRunning)
		require.Equal(t, runner.StatusSucceeded, r.Outcome.Status, "%v", r.Outcome.Err)
		require.Equal(t, "feat: hello", r.Outcome.Result.CommitMessage)
		require.FileExists(t, filepath.Join(wt, "hello.txt"))
		_, err := b.rt.Adopt(ctx, string(h.ID))
		require.ErrorIs(t, err, runner.ErrContainerNotFound, "the adopted container is removed once collected")
		require.NoDirExists(t, ex.RunDir(rec.ContainerName))
		rows, _ := xl.RunContainers(ctx, rec.RunID)
		require.Equal(t, runner.ContainerStopped, rows[0].Status)
		require.Contains(t, rows[0].ErrorMessage, "recovered after a restart")
	}

	t.Run("ExitedWhileDown", func(t *testing.T) {
		rec, h, wt := crashed(t, b, ex, xl, 2, true)
		_, err := b.rt.Wait(ctx, h.ID)
		require.NoError(t, err)
		r, err := ex.Reattach(ctx, rec, false)
		require.NoError(t, err)
		requireCollected(t, rec, h, r, wt)
	})

	t.Run("StillRunning", func(t *testing.T) {
		rec, h, wt := crashed(t, b, ex, xl, 1, true)
		r, err := ex.Reattach(ctx, rec, false)
		require.NoError(t, err)
		require.True(t, r.StillRunning)
		adopted, err := b.rt.Adopt(ctx, string(h.ID))
		require.NoError(t, err)
		require.True(t, adopted.Running, "not waiting changes nothing")
		r, err = ex.Reattach(ctx, rec, true)
		require.NoError(t, err)
		requireCollected(t, rec, h, r, wt)
		xl.mu.Lock()
		require.Positive(t, xl.seen, "the reattached container record's heartbeat ran")
		xl.mu.Unlock()
	})

	t.Run("StartingFoundByName", func(t *testing.T) {
		rec, h, wt := crashed(t, b, ex, xl, 2, false)
		require.Empty(t, rec.ContainerID)
		r, err := ex.Reattach(ctx, rec, true)
		require.NoError(t, err)
		requireCollected(t, rec, h, r, wt)
	})

	t.Run("Vanished", func(t *testing.T) {
		rec, h, _ := crashed(t, b, ex, xl, 1, true)
		require.NoError(t, b.rt.Destroy(ctx, h.ID))
		r, err := ex.Reattach(ctx, rec, true)
		require.NoError(t, err)
		require.True(t, r.Gone)
		require.Contains(t, r.Reason, "was removed while Alfred was not running")
		rows, _ := xl.RunContainers(ctx, rec.RunID)
		require.Equal(t, runner.ContainerError, rows[0].Status)
		require.Equal(t, r.Reason, rows[0].ErrorMessage)
		require.NoDirExists(t, ex.RunDir(rec.ContainerName))
	})

	t.Run("CreatedNeverStarted", func(t *testing.T) {
		// The process stopped between create and start (issue 25): the agent never ran, so the
		// run is not a failure ("no result") but gone, and the container is removed.
		rec, h, _ := crashed(t, b, ex, xl, 1, false)
		require.NoError(t, b.rt.Destroy(ctx, h.ID))
		resp, err := b.cli.ContainerCreate(ctx, &container.Config{Image: b.image, Cmd: []string{"true"},
			Labels: map[string]string{runner.LabelManaged: "true", runner.LabelMailbox: "98",
				runner.LabelRun: strconv.FormatInt(rec.RunID, 10), runner.LabelPhase: "development"}},
			nil, nil, nil, rec.ContainerName)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.rt.Destroy(context.Background(), runner.ContainerID(resp.ID)) })
		r, err := ex.Reattach(ctx, rec, true)
		require.NoError(t, err)
		require.True(t, r.Gone, "not collected as a run that wrote no result")
		require.Contains(t, r.Reason, "was created but never started")
		_, err = b.rt.Adopt(ctx, resp.ID)
		require.ErrorIs(t, err, runner.ErrContainerNotFound, "the never-started container is removed")
		rows, _ := xl.RunContainers(ctx, rec.RunID)
		require.Equal(t, runner.ContainerError, rows[0].Status)
	})

	t.Run("TimeoutStillApplies", func(t *testing.T) {
		short, err := runner.NewExecutor(runner.Config{Runtime: b.rt, Agents: map[string]runner.Agent{b.agent.Name(): b.agent},
			Bindings: map[phase.Phase]string{phase.Development: b.agent.Name()}, DataDir: t.TempDir(),
			UID: runtimetest.ImageUID, GID: runtimetest.ImageGID, Timeout: 3 * time.Second, StopGrace: time.Second,
			ContainerLog: xl})
		require.NoError(t, err)
		rec, h, _ := crashed(t, b, short, xl, 3, true)
		r, err := short.Reattach(ctx, rec, true)
		require.NoError(t, err)
		require.Equal(t, runner.StatusTimedOut, r.Outcome.Status)
		require.True(t, r.Outcome.Exit.Killed)
		_, err = b.rt.Adopt(ctx, string(h.ID))
		require.ErrorIs(t, err, runner.ErrContainerNotFound)
	})
}
