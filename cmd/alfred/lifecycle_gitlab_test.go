package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// sendGitLab posts a recorded GitLab delivery, edited by edit (GitLab's fixtures come from
// several projects, so each is pointed at the stand-in's project and issue), with the shared
// token and a fresh Idempotency-Key, as GitLab sends them.
func (e *e2e) sendGitLab(fixture, event string, edit func(map[string]any)) int {
	e.t.Helper()
	body, err := os.ReadFile(filepath.Join(forgetest.FixtureDir(e.t, forge.KindGitLab), fixture+".json"))
	require.NoError(e.t, err)
	var doc map[string]any
	require.NoError(e.t, json.Unmarshal(body, &doc))
	project := doc["project"].(map[string]any)
	project["path_with_namespace"] = e.issue.Repo
	if edit != nil {
		edit(doc)
	}
	body, err = json.Marshal(doc)
	require.NoError(e.t, err)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Gitlab-Event", event)
	h.Set("X-Gitlab-Token", liveSecret)
	h.Set("Idempotency-Key", uuid.NewString())
	h.Set("X-Gitlab-Event-UUID", uuid.NewString())
	return e.post(fixture, h, body)
}

// glAssignTask edits the recorded GitLab "Issue Hook" delivery issue_hook_open_with_changes
// into alice opening issue 1 already assigned to the bot and labelled type::task.
func glAssignTask(doc map[string]any) {
	oa := doc["object_attributes"].(map[string]any)
	oa["iid"], oa["title"] = 1, "Export the report as CSV"
	doc["user"].(map[string]any)["username"] = "alice"
	doc["assignees"] = glUsers("bot")
	doc["labels"] = glLabels("type::task")
	delete(doc, "changes")
}

func glUsers(logins ...string) []any {
	var out []any
	for i, l := range logins {
		out = append(out, map[string]any{"id": 500 + i, "username": l, "name": l})
	}
	return out
}

func glLabels(names ...string) []any {
	var out []any
	for i, n := range names {
		out = append(out, map[string]any{"id": 700 + i, "title": n, "color": "#ededed", "type": "ProjectLabel"})
	}
	return out
}

func TestLifecycleGitLabRecordedDeliveries(t *testing.T) {
	t.Parallel()
	e := startE2EOn(t, storeSQLite, forge.KindGitLab, "gitlab-org/gitlab-test", 24*time.Hour)
	ctx := context.Background()
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))

	// An issue opened already assigned to the bot (Issue Hook, action open).
	require.Equal(t, http.StatusAccepted, e.sendGitLab("issue_hook_open_with_changes", "Issue Hook", glAssignTask))
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(e.comments(), "\n"), "### q1. Which separator?") },
		e2eWait, 100*time.Millisecond, "no question block:\n%s", strings.Join(e.comments(), "\n---\n"))
	e.waitStatus("status::waiting_info")

	// alice answers in a Note Hook.
	require.Equal(t, http.StatusAccepted, e.sendGitLab("note_hook_issue", "Note Hook", func(doc map[string]any) {
		doc["user"].(map[string]any)["username"] = "alice"
		doc["object_attributes"].(map[string]any)["note"] = "Q1: 2"
		doc["object_attributes"].(map[string]any)["id"] = 98765
		doc["issue"].(map[string]any)["iid"] = 1
	}))
	e.waitStatus("status::waiting_validation")
	require.Contains(t, e.forgejo.IssueBody(e.issue), "| q1. Which separator? | b. Semicolon | @alice |")

	// alice adds ai::validate_plan: GitLab gives previous and current label lists.
	current := e.forgejo.IssueLabels(e.issue)
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.sendGitLab("issue_hook_update_label_added", "Issue Hook", func(doc map[string]any) {
		doc["object_attributes"].(map[string]any)["iid"] = 1
		doc["user"].(map[string]any)["username"] = "alice"
		after := append(append([]string{}, current...), "ai::validate_plan")
		doc["labels"] = glLabels(after...)
		doc["changes"] = map[string]any{"labels": map[string]any{"previous": glLabels(current...), "current": glLabels(after...)}}
	}))
	e.waitStatus("status::in_ci")
	mrs := e.forgejo.MergeRequests(e.issue.Repo)
	require.Len(t, mrs, 1)
	mr := mrs[0]
	require.Equal(t, "agent/issue-1-export-the-report-as-csv", mr.SourceBranch)
	require.Contains(t, e.comments()[len(e.comments())-1], fmt.Sprintf("I opened merge request !%d", mr.Number))

	// The pipeline fails, ci_fix pushes a commit, the next pipeline succeeds.
	head := func() string {
		out, err := exec.Command("git", "-C", e.bare, "rev-parse", mr.SourceBranch).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	first := head()
	e.forgejo.SetCI(e.issue.Repo, first, forgetest.CIJob{Name: "test", State: forge.CIFailed, Log: "--- FAIL: TestExport"})
	require.Equal(t, http.StatusAccepted, e.sendGitLab("pipeline_hook_success", "Pipeline Hook", func(doc map[string]any) {
		oa := doc["object_attributes"].(map[string]any)
		oa["status"], oa["sha"], oa["ref"] = "failed", first, mr.SourceBranch
		doc["merge_request"].(map[string]any)["iid"] = mr.Number
	}))
	require.Eventually(t, func() bool { return head() != first }, e2eWait, 100*time.Millisecond, "no ci_fix push")
	second := head()
	e.forgejo.SetCI(e.issue.Repo, second, forgetest.CIJob{Name: "test", State: forge.CISuccess})
	require.Equal(t, http.StatusAccepted, e.sendGitLab("pipeline_hook_success", "Pipeline Hook", func(doc map[string]any) {
		oa := doc["object_attributes"].(map[string]any)
		oa["sha"], oa["ref"] = second, mr.SourceBranch
		doc["merge_request"].(map[string]any)["iid"] = mr.Number
	}))
	e.waitStatus("status::in_review")

	e.forgejo.MarkMerged(e.issue.Repo, mr.Number)
	require.Equal(t, http.StatusAccepted, e.sendGitLab("merge_request_hook_merge", "Merge Request Hook", func(doc map[string]any) {
		oa := doc["object_attributes"].(map[string]any)
		oa["iid"], oa["source_branch"] = mr.Number, mr.SourceBranch
		doc["user"].(map[string]any)["username"] = "alice"
	}))
	e.waitStatus("status::done")
	require.Eventually(t, func() bool { return !contains(e.forgejo.IssueAssignees(e.issue), "bot") },
		30*time.Second, 100*time.Millisecond)
	e.requireUniqueMarkers()
	requireNoLeftovers(t, e.srv.cfg.DataDir)
}
