package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/runfile"
	"github.com/alfred-bot/alfred/internal/metrics"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// redTeamCanary stands for a secret of Alfred's own (its configuration, its store): the file
// holding it sits outside every run's directory, on Alfred's side.
const redTeamCanary = "alfred-own-secret-5eb3c0de"

// The flood's sizes: the runtime rotates the run's json-file log at redTeamLogFile (two files
// kept) and keeps redTeamLogBound of each stream; floodBytes is more than both, so the session
// id printed first is gone from the daemon by the time the run ends and the stream read back
// is cut. Alfred's defaults (50 MB files, runner.MaxLogBytes) behave the same at a larger
// scale; small sizes keep the test's cost to a few seconds of the daemon's time.
const (
	redTeamLogFile  = 1 << 20
	redTeamLogBound = 512 << 10
	floodBytes      = 12 << 20
)

// redTeamScript: a prompt-injected agent that attacks what Alfred reads back. The development
// run leaves its result as a link to Alfred's configuration; the ci_fix run leaves a FIFO as
// its result; the "flood" run (a development run of that key) prints its session id, then
// floodBytes, then writes a valid result; the "fifo" run writes a valid result and leaves a
// FIFO where the branch has README, which git cannot commit.
func redTeamScript(alfredConfig string) string {
	return fmt.Sprintf(`
development:
  summary: Done.
  commit_message: "feat: x"
  files: {x.txt: "x\n"}
  plant: [{path: /alfred/out/result.json, link: %q}]
ci_fix:
  summary: Done.
  commit_message: "fix: x"
  files: {y.txt: "y\n"}
  plant: [{path: /alfred/out/result.json, fifo: true}]
flood:
  summary: Reviewed after a flood.
  commit_message: "docs: flood"
  log: ["session: 0d6c8a0e-0b7e-4bfb-9a43-3c1a37e1c0de"]
  flood_bytes: %d
fifo:
  summary: Done.
  commit_message: "feat: a FIFO"
  files: {z.txt: "z\n"}
  plant: [{path: /workspace/README, fifo: true}]
`, alfredConfig, floodBytes)
}

// TestRedTeamOutputDocker: each attack on what Alfred reads back fails closed and is visible —
// the run fails with the reason (the words of the issue comment and the run's page), a warning
// in the log, alfred_hostile_output_total by reason — and nothing of Alfred's leaks: not in
// the outcome, not in the log, and nothing is pushed. The flood costs neither the session id
// (kept in the head) nor the result (read after it), and its run succeeds.
func TestRedTeamOutputDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	config := filepath.Join(dir, "alfred.yaml")
	require.NoError(t, os.WriteFile(config, []byte("forge_token: "+redTeamCanary+"\n"), 0o600))
	d := setupDocker(t, ctx, redTeamScript(config))
	d.rt.LogFileBytes, d.rt.MaxLogBytes = redTeamLogFile, redTeamLogBound
	var seen []byte // the stdout the adapter is handed
	d.agent = &captureAgent{Agent: d.agent, stdout: &seen}
	bare := seedRemote(t, dir, map[string]string{"README": "original\n"})
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: filepath.Join(dir, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID})
	require.NoError(t, err)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := metrics.New(metrics.Config{})
	jobs := m.InstrumentJobs(runner.NewService(d.executor(t, 5*time.Minute), map[string]*gitrepo.Manager{"gl": mgr}, runner.SessionConfig{}, log))
	const branch = "agent/issue-9-redteam"
	job := func(runID int64, p phase.Phase, push bool) phase.Job {
		return phase.Job{MailboxID: 44, RunID: runID, Attempt: 1, ForgeName: "gl", Branch: branch, Push: push,
			Repository: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare},
			Input:      phase.Input{Phase: p, Repo: "acme/shop", Issue: 9}}
	}
	flood := job(3, phase.Development, false)
	flood.Input.Key = "flood"

	out, err := jobs.Execute(ctx, job(1, phase.Development, true))
	require.NoError(t, err, "a refused result is the run's failure, not an infrastructure error")
	require.Equal(t, "I did not read what the agent left: refused result.json: it is a symbolic link leading out of the run's directory", out.Failure)
	require.Equal(t, []string{runfile.ReasonLink}, out.HostileOutput)
	require.Nil(t, out.Result)

	done := make(chan struct{})
	go func() {
		defer close(done)
		out, err = jobs.Execute(ctx, job(2, phase.CIFix, true))
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("a FIFO as the result held the run")
	}
	require.NoError(t, err)
	require.Equal(t, "I did not read what the agent left: refused result.json: it is not a regular file (a FIFO)", out.Failure)
	require.Equal(t, []string{runfile.ReasonNotRegular}, out.HostileOutput)

	out, err = jobs.Execute(ctx, flood)
	require.NoError(t, err)
	require.Empty(t, out.Failure, "the flood's run itself is sound")
	require.Equal(t, "Reviewed after a flood.", out.Result.Summary)
	require.Equal(t, []string{runfile.ReasonLogFlood}, out.HostileOutput)
	require.Less(t, len(out.Output), 1<<20, "the stored output is bounded")
	require.LessOrEqual(t, len(seen), redTeamLogBound+100, "the logs read are bounded")
	require.Contains(t, string(seen[:min(len(seen), 4096)]), "session: 0d6c8a0e-0b7e-4bfb-9a43-3c1a37e1c0de",
		"the session id printed first is kept, past Docker's log rotation")
	require.Contains(t, string(seen), "bytes of output dropped here")
	tail := string(seen[max(0, len(seen)-4096):])
	require.Contains(t, tail, "wrote result.json", "the tail is kept: %q", tail[max(0, len(tail)-300):])

	fifo := job(4, phase.Development, true)
	fifo.Input.Key = "fifo"
	out, err = jobs.Execute(ctx, fifo)
	require.NoError(t, err, "what git cannot commit is the run's failure, not an infrastructure error")
	require.Equal(t, "I did not commit what the agent left: `README`: it is a FIFO or a device, which git would block on"+
		" (nothing was sent; a retry starts again from the branch as the forge has it)", out.Failure)
	require.Equal(t, []string{runfile.ReasonNotRegular}, out.HostileOutput)
	require.Nil(t, out.Result)

	require.Empty(t, runGit(t, "-C", bare, "branch", "--list", branch), "nothing reached the remote")
	require.Contains(t, logs.String(), "hostile run output refused or bounded")
	for _, text := range []string{logs.String(), fmt.Sprint(out)} {
		require.NotContains(t, text, redTeamCanary)
	}
	for reason, want := range map[string]float64{runfile.ReasonLink: 1, runfile.ReasonNotRegular: 2, runfile.ReasonLogFlood: 1} {
		require.Equal(t, want, hostileCount(t, m, reason), reason)
	}
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

func hostileCount(t *testing.T, m *metrics.Metrics, reason string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "alfred_hostile_output_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRedTeamPushElsewhereDocker: a prompt-injected agent on Docker replaces the worktree's
// .git link with a forged repository — HEAD on main, an origin whose push refspec sends HEAD to
// main, a hooks path of its own — to make Alfred's push land on another branch. Alfred's git
// names its own git dir (spec/worktrees.md), so the forged files are only the agent's
// content: the commit lands on the issue's branch alone, the remote's main is untouched, no
// other branch appears, and the forged .git is not part of the commit.
func TestRedTeamPushElsewhereDocker(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bare := seedRemote(t, dir, map[string]string{"README": "original\n"})
	mainBefore := runGit(t, "-C", bare, "rev-parse", "refs/heads/main")
	d := setupDocker(t, ctx, fmt.Sprintf(`
development:
  summary: Done.
  commit_message: "feat: x"
  files: {x.txt: "x\n"}
  plant:
    - {path: /workspace/.git/HEAD, content: "ref: refs/heads/main\n"}
    - {path: /workspace/.git/config, content: "[core]\n\trepositoryformatversion = 0\n\thooksPath = /workspace/.git/hooks\n[remote \"origin\"]\n\turl = %s\n\tpush = +HEAD:refs/heads/main\n"}
    - {path: /workspace/.git/refs/heads/main, content: "%s\n"}
    - {path: /workspace/.git/objects/info/alternates, content: "/workspace/.git/objects\n"}
`, bare, mainBefore))
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: filepath.Join(dir, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID})
	require.NoError(t, err)
	svc := runner.NewService(d.executor(t, 5*time.Minute), map[string]*gitrepo.Manager{"gl": mgr}, runner.SessionConfig{}, nil)
	const branch = "agent/issue-9-redteam"
	out, err := svc.Execute(ctx, phase.Job{MailboxID: 45, RunID: 1, Attempt: 1, ForgeName: "gl", Branch: branch, Push: true,
		Repository: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare},
		Input:      phase.Input{Phase: phase.Development, Repo: "acme/shop", Issue: 9}})
	require.NoError(t, err)
	require.Empty(t, out.Failure)
	require.Contains(t, out.Output, "planted /workspace/.git/config", "the agent did forge the repository")

	require.Equal(t, mainBefore, runGit(t, "-C", bare, "rev-parse", "refs/heads/main"), "main is untouched")
	require.Equal(t, branch+"\nmain", runGit(t, "-C", bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/"),
		"no branch but the issue's appeared")
	tree := runGit(t, "-C", bare, "ls-tree", "-r", "--name-only", branch)
	require.Contains(t, tree, "x.txt", "the agent's change is on the issue's branch")
	require.NotContains(t, tree, ".git/", "the forged repository is not committed")
	require.Equal(t, mainBefore, runGit(t, "-C", bare, "rev-parse", branch+"^"), "one commit on top of main")
}
