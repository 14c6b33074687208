package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/phase"
)

var errLogs = errors.New("logs unreadable: engine went away")

// adoptRuntime is fakeRuntime whose Adopt finds an exited container of run (by id or name;
// it has run: a start time), and whose Logs fail with logErr when it is set.
type adoptRuntime struct {
	*fakeRuntime
	run    int64
	logErr error
}

func (f adoptRuntime) Adopt(_ context.Context, ref string) (runner.Handle, error) {
	return runner.Handle{ID: runner.ContainerID(ref), Name: ref, Origin: runner.OriginAdopted, StartedAt: time.Unix(1e9, 0),
		Labels: map[string]string{runner.LabelManaged: "true", runner.LabelRun: strconv.FormatInt(f.run, 10)}}, nil
}

func (f adoptRuntime) Logs(ctx context.Context, id runner.ContainerID) ([]byte, []byte, error) {
	if f.logErr != nil {
		return nil, nil, f.logErr
	}
	return f.fakeRuntime.Logs(ctx, id)
}

// leftRun lays out what a process killed during run runID leaves on the host: the run
// directory with input.json and, when result is not empty, out/result.json; and a live
// container record naming agent. It returns the record.
func leftRun(t *testing.T, ex *runner.Executor, xl *memLog, runID int64, in phase.Input, agent, result string) runner.ContainerRecord {
	t.Helper()
	name := runner.ContainerName(1, runID, in.Phase, in.Attempt)
	dir := ex.RunDir(name)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "in"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "out"), 0o755))
	data, err := json.Marshal(in)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in", "input.json"), data, 0o644))
	if result != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "out", phase.ResultFile), []byte(result), 0o644))
	}
	rec := &runner.ContainerRecord{RunID: runID, MailboxID: 1, ContainerName: name, Adapter: agent}
	require.NoError(t, xl.InsertContainer(t.Context(), rec))
	require.NoError(t, xl.ContainerStarted(t.Context(), rec.ID, runner.ContainerID("id-"+name)))
	return xl.get(len(xl.rows) - 1)
}

// TestLogReadFailureSameInRunAndReattach: logs that cannot be read are one thing whichever
// path collects the container — an infrastructure error wrapping the Runtime's, with no status
// and no result — and both paths still remove the container and end its record.
func TestLogReadFailureSameInRunAndReattach(t *testing.T) {
	t.Parallel()
	xl := &memLog{}
	rt := adoptRuntime{fakeRuntime: &fakeRuntime{}, run: 5, logErr: errLogs}
	b := setupFake(t, func(c *runner.Config) { c.Runtime = rt; c.ContainerLog = xl })
	rt.onStart = playOnHost(t)

	out, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 1, RunID: 5, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Answer}})
	require.ErrorIs(t, err, errLogs, "live run")
	require.NotNil(t, out)
	require.Empty(t, out.Status)
	require.Nil(t, out.Result)

	rec := leftRun(t, b.exec, xl, 5, phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 2}, "script",
		`{"summary":"s","answer":"42"}`)
	r, err := b.exec.Reattach(t.Context(), rec, true)
	require.ErrorIs(t, err, errLogs, "reattached run")
	require.Nil(t, r)

	rows, err := xl.RunContainers(t.Context(), 5)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, row := range rows {
		require.Equal(t, runner.ContainerStopped, row.Status, row.ContainerName)
		require.NoDirExists(t, b.exec.RunDir(row.ContainerName))
	}
	require.Len(t, rt.destroyed, 2, "both containers removed")
}

// wrongAgent fails every Result: reading a run with it means recovery picked the phase's
// current binding instead of the agent the run used.
type wrongAgent struct{ *script.Agent }

func (wrongAgent) Result(phase.Input, runner.ExitState, []byte, string) (*phase.Result, error) {
	return nil, errors.New("read by the phase's binding, not by the run's agent")
}

// TestRecoveryFindsAgentByConfiguredName: the container record holds the configured agent
// name ("main"), not the adapter kind ("script"), and Reattach reads the result with that
// agent even when the phase is now bound to another one.
func TestRecoveryFindsAgentByConfiguredName(t *testing.T) {
	t.Parallel()
	xl := &memLog{}
	b := setupFake(t, func(c *runner.Config) {
		c.Agents = map[string]runner.Agent{"main": c.Agents["script"]}
		c.Bindings = map[phase.Phase]string{phase.Answer: "main"}
		c.ContainerLog = xl
	})
	b.rt.onStart = playOnHost(t)
	out, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 1, RunID: 6, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Answer}})
	require.NoError(t, err)
	require.Equal(t, runner.StatusSucceeded, out.Status)
	require.Equal(t, "script", out.Agent, "the outcome names the adapter kind")
	require.Equal(t, "main", xl.get(0).Adapter, "the record names the configured agent")

	// A restarted Alfred whose answer phase is now bound to another agent.
	main, err := script.NewFromBytes("alfred/script-agent:test", []byte(fakeScript))
	require.NoError(t, err)
	rt := adoptRuntime{fakeRuntime: &fakeRuntime{}, run: 7}
	restarted, err := runner.NewExecutor(runner.Config{Runtime: rt, DataDir: b.data, UID: 65532, GID: 65532,
		Agents:   map[string]runner.Agent{"main": main, "other": wrongAgent{main}},
		Bindings: map[phase.Phase]string{phase.Answer: "other"}, ContainerLog: xl})
	require.NoError(t, err)
	rec := leftRun(t, restarted, xl, 7, phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1}, "main",
		`{"summary":"s","answer":"42"}`)
	r, err := restarted.Reattach(t.Context(), rec, true)
	require.NoError(t, err)
	require.Equal(t, runner.StatusSucceeded, r.Outcome.Status, "%v", r.Outcome.Err)
	require.Equal(t, "42", r.Outcome.Result.Answer)
}

// runningAdopt is adoptRuntime whose adopted container still runs, and whose Wait lasts until
// its context ends.
type runningAdopt struct{ adoptRuntime }

func (f runningAdopt) Adopt(ctx context.Context, ref string) (runner.Handle, error) {
	h, err := f.adoptRuntime.Adopt(ctx, ref)
	h.Running = true
	return h, err
}

// A process that shuts down while it waits for a container it reattached leaves it as it found
// it, exactly as a live run detaches: the container goes on, its run directory and its record
// stay for the next process, and the run is reported still running, never failed.
func TestReattachDetachedAtShutdownLeavesTheContainer(t *testing.T) {
	t.Parallel()
	xl := &memLog{}
	rt := runningAdopt{adoptRuntime{fakeRuntime: &fakeRuntime{hang: true}, run: 8}}
	b := setupFake(t, func(c *runner.Config) { c.Runtime = rt; c.ContainerLog = xl })
	rec := leftRun(t, b.exec, xl, 8, phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1}, "script", "")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(phase.ErrDetach)
	r, err := b.exec.Reattach(ctx, rec, true)
	require.NoError(t, err)
	require.True(t, r.StillRunning, "reported still running")
	require.Nil(t, r.Outcome)
	require.Empty(t, rt.destroyed, "the container goes on")
	require.DirExists(t, b.exec.RunDir(rec.ContainerName))
	rows, err := xl.RunContainers(t.Context(), 8)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, rows[0].Status.Live(), "the record stays for the next process: %s", rows[0].Status)
}

// A container the runtime reports not running, whose end it cannot read (a Pod terminating
// on a lost node keeps its last status, and its wait never ends), is not waited on for ever
// by recovery: past the bound it is stopped and removed as a run out of time.
func TestReattachOfAContainerThatNeverEndsIsBounded(t *testing.T) {
	t.Parallel()
	xl := &memLog{}
	rt := adoptRuntime{fakeRuntime: &fakeRuntime{hang: true}, run: 9}
	b := setupFake(t, func(c *runner.Config) { c.Runtime = rt; c.ContainerLog = xl; c.Timeout = 300 * time.Millisecond })
	rec := leftRun(t, b.exec, xl, 9, phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1}, "script", "")
	r, err := b.exec.Reattach(t.Context(), rec, true)
	require.NoError(t, err)
	require.NotNil(t, r.Outcome)
	require.Equal(t, runner.StatusTimedOut, r.Outcome.Status)
	require.Equal(t, []runner.ContainerID{runner.ContainerID(rec.ContainerID)}, rt.destroyed, "removed")
}
