package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

const replicaScript = `
development:
  summary: Implemented.
  commit_message: "feat: hello"
  sleep_seconds: 300
  per_attempt:
    "2": {sleep_seconds: 0}
`

// TestReapLeftoversKeepsWhatAnotherReplicaStarts: a replica's start-up reap runs while another
// replica sharing the data directory and the runtime works on. Between the moment the starting
// replica reads the store's first view of the mailboxes and its listings, the other one leases
// mailbox 7 and starts its run: session state, the mailbox's worktree, a run worktree, a run
// directory and a live container record, then the (real Docker) container. None of it may be
// removed, nor a version detection the other replica runs, nor a doctor's check; the leftovers of a mailbox that is
// closed and held by nobody are removed, with an exited detection's container.
func TestReapLeftoversKeepsWhatAnotherReplicaStarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	b := setupDocker(t, ctx, replicaScript)
	data := t.TempDir()
	instance := runner.InstanceID(data)
	xl := &memLog{}
	ex, err := runner.NewExecutor(runner.Config{Runtime: b.rt, Agents: map[string]runner.Agent{b.agent.Name(): b.agent},
		Bindings: map[phase.Phase]string{phase.Development: b.agent.Name()}, DataDir: data,
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID, Timeout: time.Minute, StopGrace: time.Second,
		ContainerLog: xl, Instance: instance})
	require.NoError(t, err)
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: data, AuthorName: "Alfred", AuthorEmail: "a@example.org"})
	require.NoError(t, err)
	sessions := runner.SessionConfig{Dir: filepath.Join(data, "sessions")}
	svc := runner.NewService(ex, map[string]*gitrepo.Manager{"forgejo": mgr}, sessions, nil)

	// start starts a real container of the installation with labels, running (attempt 1
	// sleeps) or exiting at once (attempt 2), as a run's would be.
	start := func(name string, attempt int, labels map[string]string) runner.Handle {
		in := phase.Input{Phase: phase.Development, Key: "development", Attempt: attempt}
		inv, err := b.agent.Command(in)
		require.NoError(t, err)
		runDir := ex.RunDir(name)
		inDir, outDir := filepath.Join(runDir, "in"), filepath.Join(runDir, "out")
		require.NoError(t, os.MkdirAll(inDir, 0o755))
		require.NoError(t, os.MkdirAll(outDir, 0o777))
		require.NoError(t, os.Chmod(outDir, 0o777))
		raw, _ := json.Marshal(in)
		require.NoError(t, os.WriteFile(filepath.Join(inDir, "input.json"), raw, 0o644))
		for f, content := range inv.Files {
			require.NoError(t, os.WriteFile(filepath.Join(inDir, f), content, 0o644))
		}
		h, err := b.rt.Start(ctx, runner.ContainerSpec{Name: name, Image: inv.Image, Cmd: inv.Cmd,
			Env: []string{"HOME=" + runner.HomeDir}, WorkingDir: runner.WorkspaceDir, User: runtimetest.ImageUser,
			Mounts: []runner.Mount{{Source: worktree(t), Target: runner.WorkspaceDir}, {Source: inDir, Target: runner.InputDir, ReadOnly: true},
				{Source: outDir, Target: runner.OutputDir}},
			Labels: ex.ManagedLabels(labels), Limits: runner.Limits{MemoryBytes: 256 << 20, NanoCPUs: 1e9, PIDs: 128}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.rt.Destroy(context.Background(), h.ID) })
		return h
	}
	name := func(mb, run int64) string {
		return fmt.Sprintf("alfred-%s-mbx%d-r%d-development-a1", instance, mb, run)
	}
	dirs := func(mb, run int64) []string {
		return []string{sessions.SessionDir(mb, "claude-code"), filepath.Join(data, "worktrees", runner.WorktreeName(mb)),
			filepath.Join(data, "worktrees", fmt.Sprintf("alfred-mbx%d-r%d", mb, run))}
	}

	// Leftovers of mailbox 3, closed and held by nobody: its session state, worktrees, run
	// directory and an exited container with an ended record. Another replica's version
	// detection is running; one of a process that died has exited.
	for _, d := range dirs(3, 30) {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	old := start(name(3, 30), 2, map[string]string{runner.LabelMailbox: "3", runner.LabelRun: "30", runner.LabelPhase: "development"})
	_, err = b.rt.Wait(ctx, old.ID)
	require.NoError(t, err)
	detecting := start(fmt.Sprintf("alfred-detect-%s-live", instance), 1, map[string]string{runner.LabelPhase: "detect"})
	// `alfred doctor` checks an agent's image meanwhile (a rollout starts a replica beside it).
	checking := start(fmt.Sprintf("alfred-doctor-%s-live", instance), 1, map[string]string{runner.LabelPhase: runner.DoctorPhase})
	detected := start(fmt.Sprintf("alfred-detect-%s-dead", instance), 2, map[string]string{runner.LabelPhase: "detect"})
	_, err = b.rt.Wait(ctx, detected.ID)
	require.NoError(t, err)

	// The store as the starting replica reads it. The first read happens before the other
	// replica leases mailbox 7 (it is not there yet); the other replica then starts its run,
	// and every later read sees the lease, the open mailbox and the live record.
	store := runner.Mailboxes{Leased: map[int64]bool{}, Open: map[int64]bool{}, LiveContainers: map[int64]bool{}}
	reads := 0
	var live runner.Handle
	read := func(context.Context) (runner.Mailboxes, error) {
		reads++
		view := runner.Mailboxes{Leased: clone(store.Leased), Open: clone(store.Open), LiveContainers: clone(store.LiveContainers)}
		if reads == 1 {
			store.Leased[7], store.Open[7] = true, true
			for _, d := range dirs(7, 70) {
				require.NoError(t, os.MkdirAll(d, 0o755))
			}
			rec := &runner.ContainerRecord{RunID: 70, MailboxID: 7, ContainerName: name(7, 70), Adapter: b.agent.Name()}
			require.NoError(t, xl.InsertContainer(ctx, rec))
			store.LiveContainers[7] = true
			live = start(name(7, 70), 1, map[string]string{runner.LabelMailbox: "7", runner.LabelRun: "70", runner.LabelPhase: "development"})
			require.NoError(t, xl.ContainerStarted(ctx, rec.ID, live.ID))
		}
		return view, nil
	}
	require.NoError(t, svc.ReapLeftovers(ctx, read))
	require.Greater(t, reads, 1, "the store is read again after the listings")

	for _, d := range dirs(7, 70) {
		require.DirExists(t, d, "the other replica's live run keeps its state")
	}
	require.DirExists(t, ex.RunDir(name(7, 70)))
	h, err := b.rt.Adopt(ctx, string(live.ID))
	require.NoError(t, err, "the other replica's container was removed")
	require.True(t, h.Running)
	h, err = b.rt.Adopt(ctx, string(detecting.ID))
	require.NoError(t, err, "the other replica's version detection was removed")
	require.True(t, h.Running)
	h, err = b.rt.Adopt(ctx, string(checking.ID))
	require.NoError(t, err, "the doctor's check was removed")
	require.True(t, h.Running)

	for _, d := range dirs(3, 30) {
		require.NoDirExists(t, d, "a leftover of a closed mailbox held by nobody")
	}
	require.NoDirExists(t, ex.RunDir(name(3, 30)))
	for _, id := range []runner.ContainerID{old.ID, detected.ID} {
		_, err = b.rt.Adopt(ctx, string(id))
		require.ErrorIs(t, err, runner.ErrContainerNotFound, "an exited leftover container is removed")
	}
}

func clone(m map[int64]bool) map[int64]bool {
	out := make(map[int64]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
