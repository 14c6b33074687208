package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// markerFile is what the benchmark's agent writes first, in its workspace.
const markerFile = ".alfred-started"

// triggerScript asks nothing in the analysis; the development run writes the marker first.
const triggerScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
  expected_behaviour: An Export button downloads report.csv.
  acceptance_criteria: [the file opens in a spreadsheet]
  out_of_scope: [PDF export]
analysis.technical:
  summary: Planned.
  plan: "1. Add export.csv."
development:
  summary: Started.
  commit_message: "Add the marker"
  files:
    ` + markerFile + `: "started\n"
`

// BenchmarkTriggerToAgent measures what a maintainer waits for: from the webhook that adds
// ai::validate_plan to an issue waiting for validation until the agent process of the
// development run has started — delivery stored, mailbox leased and stepped, comment posted,
// worktree prepared (the mailbox's third run: its analyses ran before), container created and
// started, agent writing its first file (the marker, polled every millisecond). Every iteration
// is a new issue of the same repository, brought to waiting_validation outside the time
// (assigned with type::task; both analyses run). In the same iteration, outside the trigger's
// time, the same image runs bare (docker run --rm, the marker in a bind mount) and writes the
// same marker the same way. Reported: trigger-ms and bare-ms, the medians over the iterations,
// and their ratio (trigger/bare). Each issue is closed at the end of its iteration.
//
// small is the seeded repository (one commit); large has 3,000 files more on main.
func BenchmarkTriggerToAgent(b *testing.B) {
	for _, files := range []int{0, 3000} {
		name := "small"
		if files > 0 {
			name = "large"
		}
		b.Run(name, func(b *testing.B) {
			agents, image := scriptAgents(b, triggerScript)
			e := startE2EWith(b, storeSQLite, forge.KindForgejo, "acceptance/sandbox", 24*time.Hour, agents)
			addFiles(b, e.bare, files)
			bare := newBareRun(b, image, triggerScript)
			var trigger, plain []time.Duration
			for b.Loop() {
				plain = append(plain, bare.run(b))
				trigger = append(trigger, e.triggerOnce(b))
			}
			median := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2].Microseconds()) / 1000
			}
			b.ReportMetric(median(trigger), "trigger-ms")
			b.ReportMetric(median(plain), "bare-ms")
			b.ReportMetric(median(trigger)/median(plain), "ratio")
		})
	}
}

// addFiles commits n files of a few hundred bytes (d<i/30>/f<i>.txt) on main of the bare
// repository, with git fast-import.
func addFiles(b *testing.B, bare string, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	var in strings.Builder
	msg := "many files\n"
	fmt.Fprintf(&in, "commit refs/heads/main\ncommitter Gen <gen@example.com> 1700000000 +0000\ndata %d\n%sfrom refs/heads/main^0\n", len(msg), msg)
	for i := range n {
		body := fmt.Sprintf("file %d\n%0300d\n", i, i)
		fmt.Fprintf(&in, "M 100644 inline d%03d/f%05d.txt\ndata %d\n%s\n", i/30, i, len(body), body)
	}
	in.WriteString("\n")
	cmd := exec.Command("git", "-C", bare, "fast-import", "--quiet")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "fast-import: %s", out)
}

// triggerOnce opens an issue, brings it to waiting_validation, and returns the time from the
// validation webhook until the development run's marker appears in the mailbox's worktree;
// then it waits for the merge request (status::in_ci), closes the issue and waits for the
// mailbox to close.
func (e *e2e) triggerOnce(b *testing.B) time.Duration {
	b.Helper()
	return e.triggerOnceHook(b, nil)
}

// triggerOnceHook is triggerOnce, calling seen (when not nil) once the marker appeared, with
// the mailbox, when the validation webhook was sent and when the marker was seen.
func (e *e2e) triggerOnceHook(b *testing.B, seen func(mailboxID int64, start, marked time.Time)) time.Duration {
	b.Helper()
	ctx := context.Background()
	number := e.forgejo.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: "Export the report as CSV",
		Body: "The monthly report should be downloadable.", Author: "alice", Assignees: []string{"bot"},
		Labels: []string{"type::task"}})
	ref := forge.IssueRef{Forge: e.issue.Forge, Repo: e.issue.Repo, Number: number}
	edit := func(labels ...string) func(map[string]any) {
		return func(doc map[string]any) {
			setLabels(labels...)(doc)
			doc["number"] = number
			issue := doc["issue"].(map[string]any)
			issue["number"], issue["id"] = number, number
		}
	}
	waitLabel := func(want string) {
		require.Eventually(b, func() bool { return contains(e.forgejo.IssueLabels(ref), want) },
			2*time.Minute, 20*time.Millisecond, "issue %d never reached %s; labels %v", number, want, e.forgejo.IssueLabels(ref))
	}
	require.Equal(b, http.StatusAccepted, e.send("002-issue_assign-assigned", edit("type::task")))
	waitLabel("status::waiting_validation")
	mb, err := e.srv.store.Find(ctx, ref)
	require.NoError(b, err)
	mailboxID := mb.ID
	glob := filepath.Join(e.srv.cfg.DataDir, "worktrees", fmt.Sprintf("alfred-mbx%d-*", mailboxID), markerFile)
	require.NoError(b, e.api.SetLabels(ctx, ref, []string{"ai::validate_plan"}, nil))

	start := time.Now()
	require.Equal(b, http.StatusAccepted, e.send("003-issue_label-label_updated", edit(e.forgejo.IssueLabels(ref)...)))
	require.Eventually(b, func() bool { m, _ := filepath.Glob(glob); return len(m) > 0 },
		2*time.Minute, time.Millisecond, "the agent never started; comments: %v", e.forgejo.IssueComments(ref))
	took := time.Since(start)
	if seen != nil {
		seen(mailboxID, start, start.Add(took))
	}
	waitLabel("status::in_ci")
	// The issue is closed, so the mailbox closes and its worktree is retired.
	require.Equal(b, http.StatusAccepted, e.send("023-issues-closed", edit(e.forgejo.IssueLabels(ref)...)))
	require.Eventually(b, func() bool {
		mb, err := e.srv.store.Get(ctx, mailboxID)
		return err == nil && mb.ClosedAt != nil
	}, 2*time.Minute, 20*time.Millisecond, "mailbox %d never closed", mailboxID)
	return took
}

// bareRun runs the script agent image with docker run --rm, its input, script and workspace
// bind-mounted.
type bareRun struct {
	image, dir string
}

func newBareRun(b *testing.B, image, script string) *bareRun {
	dir := b.TempDir()
	require.NoError(b, os.Chmod(dir, 0o777))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(script), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "input.json"),
		[]byte(`{"phase":"development","attempt":1,"repo":"acceptance/sandbox","issue":1}`), 0o644))
	return &bareRun{image: image, dir: dir}
}

// run starts the container and returns the time until the marker appears; it then waits for
// docker run to return (the container removed).
func (r *bareRun) run(b *testing.B) time.Duration {
	b.Helper()
	ws := filepath.Join(r.dir, "ws")
	out := filepath.Join(r.dir, "out")
	for _, d := range []string{ws, out} {
		require.NoError(b, os.RemoveAll(d))
		require.NoError(b, os.Mkdir(d, 0o777))
		require.NoError(b, os.Chmod(d, 0o777))
	}
	marker := filepath.Join(ws, markerFile)
	cmd := exec.Command("docker", "run", "--rm", "-v", r.dir+":/bench", r.image,
		"-script", "/bench/script.yaml", "-input", "/bench/input.json", "-workspace", "/bench/ws", "-out", "/bench/out")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	require.NoError(b, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Poll for the marker every millisecond (the figure's resolution) until the container ends.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		select {
		case err := <-done:
			require.FailNow(b, "the bare container exited without its marker", "%v: %s", err, stderr.String())
		case <-tick.C:
		}
	}
	took := time.Since(start)
	require.NoError(b, <-done, "docker run: %s", stderr.String())
	return took
}
