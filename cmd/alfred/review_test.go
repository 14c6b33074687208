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

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

const reviewScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
analysis.technical:
  summary: Planned.
  plan: Add export.csv with the header row.
development:
  summary: Added the CSV export.
  commit_message: "Add CSV export"
  files:
    export.csv: "date,amount\n"
review_fix:
  summary: Addressed the review.
  commit_message: "Add the currency column"
  files:
    export.csv: "date,amount,currency\n"
  comment_rules:
    - {match: "why", outcome: answered, reply: "Because spreadsheets read commas everywhere."}
    - {match: "", outcome: fixed, reply: "Added the currency column."}
conflict_resolution:
  summary: Kept both header rows.
  commit_message: "Merge main into the branch"
  resolve_conflicts: both
review:
  summary: A few remarks on the docs.
  review_comments:
    - {path: docs/report.md, line: 2, body: "Say which month the report covers."}
`

// startReview starts an e2e Alfred on kind with reviewScript and a one-second review quiet
// time.
func startReview(t *testing.T, kind forge.Kind, repo, script string) *e2e {
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
`, image, scriptPath), "ALFRED_LIFECYCLE_REVIEW_QUIET=1s")
}

// git runs git in the bare repository (or with -C dir in args) and returns its trimmed output.
func (e *e2e) git(args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = e.bare
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=alice", "GIT_AUTHOR_EMAIL=alice@example.org",
		"GIT_COMMITTER_NAME=alice", "GIT_COMMITTER_EMAIL=alice@example.org")
	out, err := cmd.CombinedOutput()
	require.NoError(e.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// commitOn commits files on branch of the bare repository as alice (from base when the
// branch is new) and returns the commit.
func (e *e2e) commitOn(branch, base, message string, files map[string]string) string {
	e.t.Helper()
	work := filepath.Join(e.t.TempDir(), "work")
	e.git("clone", "--quiet", e.bare, work)
	if e.git("-C", work, "ls-remote", "--heads", "origin", branch) == "" {
		e.git("-C", work, "checkout", "--quiet", "-b", branch, "origin/"+base)
	} else {
		e.git("-C", work, "checkout", "--quiet", branch)
	}
	for p, c := range files {
		require.NoError(e.t, os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755))
		require.NoError(e.t, os.WriteFile(filepath.Join(work, p), []byte(c), 0o644))
	}
	e.git("-C", work, "add", ".")
	e.git("-C", work, "commit", "--quiet", "-m", message)
	e.git("-C", work, "push", "--quiet", "origin", branch)
	return e.git("-C", work, "rev-parse", "HEAD")
}

// toInReview drives issue #1 (type task, no questions) to in_review with green CI and returns
// the bot's merge request.
func (e *e2e) toInReview(assign func()) forge.MergeRequest {
	e.t.Helper()
	ctx := context.Background()
	require.NoError(e.t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	assign()
	e.waitStatus("status::waiting_validation")
	require.NoError(e.t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	e.labelsChanged("ai::validate_plan")
	e.waitStatus("status::in_ci")
	mrs := e.forgejo.MergeRequests(e.issue.Repo)
	require.Len(e.t, mrs, 1)
	e.greenCI(mrs[0].SourceBranch)
	e.waitStatus("status::in_review")
	return mrs[0]
}

// labelsChanged sends the label event of the issue's current labels by alice, who added added
// (GitLab says which list the labels had before; Forgejo sends only the list after).
func (e *e2e) labelsChanged(added string) {
	e.t.Helper()
	current := e.forgejo.IssueLabels(e.issue)
	switch e.kind {
	case forge.KindGitLab:
		before := slices.DeleteFunc(slices.Clone(current), func(l string) bool { return l == added })
		require.Equal(e.t, http.StatusAccepted, e.sendGitLab("issue_hook_update_label_added", "Issue Hook", func(doc map[string]any) {
			oa := doc["object_attributes"].(map[string]any)
			oa["iid"], oa["title"] = 1, "Export the report as CSV"
			doc["user"].(map[string]any)["username"] = "alice"
			doc["labels"] = glLabels(current...)
			doc["changes"] = map[string]any{"labels": map[string]any{"previous": glLabels(before...), "current": glLabels(current...)}}
		}))
	default:
		require.Equal(e.t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(current...)))
	}
}

// greenCI sets CI success on the head of branch in the bare repository.
func (e *e2e) greenCI(branch string) string {
	e.t.Helper()
	head := e.git("rev-parse", branch)
	e.forgejo.SetCI(e.issue.Repo, head, forgetest.CIJob{Name: "ci/test", State: forge.CISuccess})
	return head
}

// waitHead waits until branch's head in the bare repository differs from old and returns it.
func (e *e2e) waitHead(branch, old string) string {
	e.t.Helper()
	var head string
	require.Eventually(e.t, func() bool {
		head = e.git("rev-parse", branch)
		return head != old
	}, e2eWait, 100*time.Millisecond, "no new commit on %s; comments:\n%s", branch, strings.Join(e.comments(), "\n---\n"))
	return head
}

// reviewDelivery edits a recorded review delivery of the forgejo-live-review set to point at
// the bot's pull request mr.
func reviewDelivery(mr forge.MergeRequest) func(map[string]any) {
	return func(doc map[string]any) {
		doc["number"] = mr.Number
		pr := doc["pull_request"].(map[string]any)
		pr["number"] = mr.Number
		pr["head"].(map[string]any)["ref"] = mr.SourceBranch
	}
}

// The review loop on Forgejo, driven by the deliveries recorded on Forgejo 15: a request for
// changes with an inline comment is fixed on the same branch and answered in its thread; a
// question is answered without a commit; a conflict with main is merged and resolved.
func TestReviewLoopForgejo(t *testing.T) {
	t.Parallel()
	e := startReview(t, forge.KindForgejo, "acceptance/sandbox", reviewScript)
	rs := e.forgejo.(forgetest.ReviewSeeder)
	mr := e.toInReview(func() {
		require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	})
	head := e.git("rev-parse", mr.SourceBranch)

	// alice requests changes with an inline comment (the review is on the forge; the delivery,
	// as recorded, carries none of it).
	ids := rs.AddReview(e.issue.Repo, mr.Number, "alice", "changes_requested", "One thing to fix.",
		forgetest.SeedReviewComment{Path: "export.csv", NewLine: 1, Body: "Please add a currency column."})
	require.Equal(t, http.StatusAccepted, e.sendFrom("forgejo-live-review", "003-pull_request_review_rejected-reviewed", reviewDelivery(mr)))
	fixed := e.waitHead(mr.SourceBranch, head)
	require.Equal(t, "date,amount,currency\n", e.git("show", fixed+":export.csv")+"\n")
	require.Equal(t, head, e.git("rev-parse", fixed+"^"), "a new commit on the same branch, no force push")
	e.waitStatus("status::in_ci")
	reply := e.waitReply(mr.Number, ids[0])
	require.Contains(t, reply.Body, "Added the currency column. Fixed in "+fixed[:7])
	e.greenCI(mr.SourceBranch)
	e.waitStatus("status::in_review")

	// A question in a second review: answered in its thread, no commit.
	ids = rs.AddReview(e.issue.Repo, mr.Number, "alice", "commented", "",
		forgetest.SeedReviewComment{Path: "export.csv", NewLine: 1, Body: "Why commas and not semicolons?"})
	require.Equal(t, http.StatusAccepted, e.sendFrom("forgejo-live-review", "004-pull_request_review_comment-reviewed", reviewDelivery(mr)))
	reply = e.waitReply(mr.Number, ids[0])
	require.Contains(t, reply.Body, "Because spreadsheets read commas everywhere.")
	e.waitStatus("status::in_review")
	require.Equal(t, fixed, e.git("rev-parse", mr.SourceBranch), "an answer needs no commit")

	// A conflicting change merged to main: Forgejo says nothing; Alfred reads mergeable false
	// twice, merges main into the branch and resolves the conflict.
	e.commitOn("main", "main", "Semicolons", map[string]string{"export.csv": "date;amount\n"})
	rs.SetMergeStatus(e.issue.Repo, mr.Number, forge.MergeStatusConflict)
	merged := e.waitHead(mr.SourceBranch, fixed)
	rs.SetMergeStatus(e.issue.Repo, mr.Number, forge.MergeStatusMergeable)
	parents := strings.Fields(e.git("rev-list", "--parents", "-n1", merged))
	require.Len(t, parents, 3, "a merge commit")
	require.Equal(t, fixed, parents[1])
	content := e.git("show", merged+":export.csv")
	require.NotContains(t, content, "<<<<<<<")
	require.Contains(t, content, "date,amount,currency")
	require.Contains(t, content, "date;amount")
	e.waitStatus("status::in_ci")
	e.greenCI(mr.SourceBranch)
	e.waitStatus("status::in_review")
	e.requireUniqueMarkers()
}

// waitReply waits for the bot's reply in the thread of review comment id and returns it.
func (e *e2e) waitReply(mr, id int64) forge.ReviewComment {
	e.t.Helper()
	rs := e.forgejo.(forgetest.ReviewSeeder)
	var reply forge.ReviewComment
	require.Eventually(e.t, func() bool {
		all := rs.ThreadComments(e.issue.Repo, mr)
		i := slices.IndexFunc(all, func(c forge.ReviewComment) bool { return c.ID == id })
		if i < 0 {
			return false
		}
		for _, c := range all[i+1:] {
			if c.Thread == all[i].Thread && c.Author.Login == e.forgejo.BotLogin() {
				reply = c
				return true
			}
		}
		return false
	}, e2eWait, 100*time.Millisecond, "no reply to comment %d; comments:\n%s", id, strings.Join(e.comments(), "\n---\n"))
	return reply
}

// The review loop on the GitLab stand-in: a diff note (one Note Hook per comment, with its
// position) is fixed, answered in its discussion and the discussion resolved; a merge request
// hook with detailed_merge_status "conflict" gets the target merged; asked as reviewer on
// alice's merge request (reviewers updated), the bot posts one review with an inline comment.
func TestReviewLoopGitLab(t *testing.T) {
	t.Parallel()
	e := startReview(t, forge.KindGitLab, "gitlab-org/gitlab-test", reviewScript)
	rs := e.forgejo.(forgetest.ReviewSeeder)
	mr := e.toInReview(func() {
		require.Equal(t, http.StatusAccepted, e.sendGitLab("issue_hook_open_with_changes", "Issue Hook", glAssignTask))
	})
	head := e.git("rev-parse", mr.SourceBranch)

	ids := rs.AddReview(e.issue.Repo, mr.Number, "alice", "commented", "",
		forgetest.SeedReviewComment{Path: "export.csv", NewLine: 1, Body: "Please add a currency column."})
	discussion := rs.ThreadComments(e.issue.Repo, mr.Number)[0].Thread
	require.Equal(t, http.StatusAccepted, e.sendGitLab("note_hook_diff_note_on_merge_request", "Note Hook", func(doc map[string]any) {
		doc["user"].(map[string]any)["username"] = "alice"
		oa := doc["object_attributes"].(map[string]any)
		oa["id"], oa["note"], oa["discussion_id"] = ids[0], "Please add a currency column.", discussion
		pos := oa["position"].(map[string]any)
		pos["new_path"], pos["old_path"], pos["new_line"] = "export.csv", "export.csv", 1
		m := doc["merge_request"].(map[string]any)
		m["iid"], m["source_branch"], m["target_branch"] = mr.Number, mr.SourceBranch, "main"
	}))
	fixed := e.waitHead(mr.SourceBranch, head)
	reply := e.waitReply(mr.Number, ids[0])
	require.Contains(t, reply.Body, "Fixed in "+fixed[:7])
	require.Equal(t, discussion, reply.Thread, "a note in the same discussion")
	require.Eventually(t, func() bool { return rs.ThreadComments(e.issue.Repo, mr.Number)[0].Resolved },
		30*time.Second, 100*time.Millisecond, "the fixed discussion is resolved")
	e.waitStatus("status::in_ci")
	e.greenCI(mr.SourceBranch)
	e.waitStatus("status::in_review")

	// main changes the same line; GitLab reports the conflict in a merge request hook.
	e.commitOn("main", "main", "Semicolons", map[string]string{"export.csv": "date;amount\n"})
	rs.SetMergeStatus(e.issue.Repo, mr.Number, forge.MergeStatusConflict)
	require.Equal(t, http.StatusAccepted, e.sendGitLab("merge_request_hook_reviewer_removed", "Merge Request Hook", func(doc map[string]any) {
		oa := doc["object_attributes"].(map[string]any)
		oa["iid"], oa["source_branch"], oa["detailed_merge_status"] = mr.Number, mr.SourceBranch, "conflict"
	}))
	merged := e.waitHead(mr.SourceBranch, fixed)
	rs.SetMergeStatus(e.issue.Repo, mr.Number, forge.MergeStatusMergeable)
	require.Len(t, strings.Fields(e.git("rev-list", "--parents", "-n1", merged)), 3, "a merge commit")
	require.NotContains(t, e.git("show", merged+":export.csv"), "=======")

	// alice asks the bot to review her merge request.
	e.commitOn("alice/docs", "main", "Document the report", map[string]string{"docs/report.md": "# Report\nThe monthly report.\n"})
	n := rs.AddMergeRequest(e.issue.Repo, "alice/docs", "main", "Document the monthly report", "alice")
	require.Equal(t, http.StatusAccepted, e.sendGitLab("merge_request_hook_reviewer_added", "Merge Request Hook", func(doc map[string]any) {
		oa := doc["object_attributes"].(map[string]any)
		oa["iid"], oa["source_branch"], oa["target_branch"], oa["title"] = n, "alice/docs", "main", "Document the monthly report"
		doc["user"].(map[string]any)["username"] = "alice"
		doc["reviewers"] = glUsers("bot")
		doc["changes"].(map[string]any)["reviewers"] = map[string]any{"previous": []any{}, "current": glUsers("bot")}
	}))
	ref := forge.IssueRef{Forge: e.issue.Forge, Repo: e.issue.Repo, Number: n, MergeRequest: true}
	require.Eventually(t, func() bool {
		for _, c := range rs.ThreadComments(e.issue.Repo, n) {
			if c.Author.Login == e.forgejo.BotLogin() && c.Position != nil && *c.Position == (forge.Position{Path: "docs/report.md", NewLine: 2}) {
				return true
			}
		}
		return false
	}, e2eWait, 100*time.Millisecond, "no inline review comment")
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(e.forgejo.IssueComments(ref), func(c forge.Comment) bool {
			return strings.HasSuffix(c.Body, "\nA few remarks on the docs.") // after the review's hidden marker
		})
	}, 30*time.Second, 100*time.Millisecond, "the review's summary")
	require.Len(t, rs.ThreadComments(e.issue.Repo, n), 1, "one review, posted once")
	e.requireUniqueMarkers()
}

const blockingScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
analysis.technical:
  summary: Planned.
  plan: Add export.csv with the header row.
development:
  summary: Added the CSV export.
  commit_message: "Add CSV export"
  sleep_seconds: 300
  files:
    export.csv: "date,amount\n"
  per_attempt:
    "2": {sleep_seconds: 0}
`

// containers counts this test's Alfred containers (its instance label).
func (e *e2e) containers() int {
	e.t.Helper()
	list, err := runtimetest.Client(e.t).ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "alfred.managed=true"),
			filters.Arg("label", "alfred.instance="+runner.InstanceID(e.srv.cfg.DataDir)))})
	require.NoError(e.t, err)
	return len(list)
}

// A human's status::blocked during the development stops the container within seconds and
// nothing is pushed; ai::retry runs the development again (resuming the session) and Alfred
// removes the label.
func TestHumanBlockedStopsTheRunAndRetryResumes(t *testing.T) {
	t.Parallel()
	e := startReview(t, forge.KindForgejo, "acceptance/sandbox", blockingScript)
	ctx := context.Background()
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitStatus("status::waiting_validation")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	e.labelsChanged("ai::validate_plan")
	e.waitStatus("status::in_development")
	require.Eventually(t, func() bool { return e.containers() == 1 }, e2eWait, 100*time.Millisecond, "the development container")

	// alice sets status::blocked while the agent works.
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"status::blocked"}, nil))
	e.labelsChanged("status::blocked")
	stopped := time.Now()
	require.Eventually(t, func() bool { return e.containers() == 0 }, 30*time.Second, 100*time.Millisecond, "the container is destroyed")
	require.Less(t, time.Since(stopped), 15*time.Second)
	require.Eventually(t, func() bool {
		return strings.Contains(strings.Join(e.comments(), "\n"), "I stopped, as @alice added `status::blocked`")
	}, 30*time.Second, 100*time.Millisecond, "Alfred says so")
	out, err := exec.Command("git", "-C", e.bare, "branch", "--list", "agent/*").CombinedOutput()
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(out)), "nothing was pushed")
	require.Empty(t, e.forgejo.MergeRequests(e.issue.Repo))
	require.Equal(t, []string{"status::blocked"}, e.statusLabels(), "one status label")

	// ai::retry: the development runs again, and the label is gone.
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::retry"}, nil))
	e.labelsChanged("ai::retry")
	e.waitStatus("status::in_ci")
	require.NotContains(t, e.forgejo.IssueLabels(e.issue), "ai::retry")
	require.NotContains(t, e.forgejo.IssueLabels(e.issue), "status::blocked")
	require.Contains(t, strings.Join(e.comments(), "\n"), "Retrying as asked by @alice.")
	require.Len(t, e.forgejo.MergeRequests(e.issue.Repo), 1)
	require.Equal(t, 1, strings.Count(strings.Join(e.comments(), "\n"), "I stopped, as @alice"), "said once")
	e.requireUniqueMarkers()
}
