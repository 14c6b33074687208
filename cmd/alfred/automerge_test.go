package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// startAutoMerge is startReview with more ALFRED_* variables.
func startAutoMerge(t *testing.T, kind forge.Kind, repo string, env ...string) *e2e {
	t.Helper()
	return startAutoMergeScript(t, kind, repo, reviewScript, env...)
}

// startAutoMergeScript is startAutoMerge with script as the script agent's script.
func startAutoMergeScript(t *testing.T, kind forge.Kind, repo, script string, env ...string) *e2e {
	t.Helper()
	image := scriptImage(t)
	scriptPath := filepath.Join(t.TempDir(), "script.yaml")
	require.NoError(t, os.WriteFile(scriptPath, []byte(script), 0o644))
	return startE2EWith(t, storePostgres, kind, repo, time.Hour, fmt.Sprintf(`
agents:
  - name: script
    adapter: script
    image: %s
    script: %s
phases:
  default: script
`, image, scriptPath), append([]string{"ALFRED_LIFECYCLE_REVIEW_QUIET=1s"}, env...)...)
}

// waitMerged waits until the stand-in says merge request number was merged through its merge
// API and returns the method.
func (e *e2e) waitMerged(number int64) string {
	e.t.Helper()
	ms := e.forgejo.(forgetest.MergeSeeder)
	require.Eventually(e.t, func() bool { return ms.MergedWith(e.issue.Repo, number) != "" },
		e2eWait, 100*time.Millisecond, "never merged; comments:\n%s", strings.Join(e.comments(), "\n---\n"))
	return ms.MergedWith(e.issue.Repo, number)
}

// On Forgejo, through the real client and the stand-in's API: a writer's ai::auto_merge on a
// green pull request approved as the branch protection requires merges it with the configured
// method, and the issue is done.
func TestAutoMergeForgejo(t *testing.T) {
	t.Parallel()
	e := startAutoMerge(t, forge.KindForgejo, "acceptance/sandbox", "ALFRED_LIFECYCLE_MERGE_METHOD=squash")
	ms := e.forgejo.(forgetest.MergeSeeder)
	ms.SetRequiredApprovals(e.issue.Repo, "main", 1)
	mr := e.toInReview(func() {
		require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	})
	ms.SetBranch(e.issue.Repo, mr.SourceBranch, e.git("rev-parse", mr.SourceBranch)) // the forge sees the push
	ms.AddReview(e.issue.Repo, mr.Number, "alice", "approved", "")

	require.NoError(t, e.api.SetLabels(context.Background(), e.issue, []string{"ai::auto_merge"}, nil))
	e.labelsChanged("ai::auto_merge")
	require.Equal(t, "squash", e.waitMerged(mr.Number))
	e.waitStatus("status::done")
	require.Contains(t, strings.Join(e.comments(), "\n"), "I merged pull request #2 (squash): CI is green on")
	e.requireUniqueMarkers()
}

// On GitLab, auto-merge on for every project by the configuration: a green merge request is
// merged once approved as its rule requires, and the issue is done.
func TestAutoMergeGitLab(t *testing.T) {
	t.Parallel()
	e := startAutoMerge(t, forge.KindGitLab, "gitlab-org/gitlab-test", "ALFRED_LIFECYCLE_AUTO_MERGE=true")
	ms := e.forgejo.(forgetest.MergeSeeder)
	ms.SetRequiredApprovals(e.issue.Repo, "main", 1)
	mr := e.toInReview(func() {
		require.Equal(t, http.StatusAccepted, e.sendGitLab("issue_hook_open_with_changes", "Issue Hook", glAssignTask))
	})
	ms.SetBranch(e.issue.Repo, mr.SourceBranch, e.git("rev-parse", mr.SourceBranch)) // the forge sees the push
	require.Empty(t, ms.MergedWith(e.issue.Repo, mr.Number), "not approved yet")
	ms.AddReview(e.issue.Repo, mr.Number, "alice", "approved", "")
	require.Equal(t, "merge", e.waitMerged(mr.Number))
	e.waitStatus("status::done")
	require.Contains(t, strings.Join(e.comments(), "\n"), "I merged merge request !1 (merge)")
}
