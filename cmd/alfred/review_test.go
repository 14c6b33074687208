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

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

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
	cli := runtimetest.Client(t)
	image := runtimetest.BuildImage(t, context.Background(), cli, "alfred-e2e-script:"+strings.ToLower(uuid.NewString()[:8]), "../alfred-script-agent")
	scriptPath := filepath.Join(t.TempDir(), "script.yaml")
	require.NoError(t, os.WriteFile(scriptPath, []byte(script), 0o644))
	return startE2EWith(t, kind, repo, time.Hour, fmt.Sprintf(`
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
	e.labelsChanged()
	e.waitStatus("status::in_ci")
	mrs := e.forgejo.MergeRequests(e.issue.Repo)
	require.Len(e.t, mrs, 1)
	e.greenCI(mrs[0].SourceBranch)
	e.waitStatus("status::in_review")
	return mrs[0]
}

// labelsChanged sends the label event of the issue's current labels, by alice.
func (e *e2e) labelsChanged() {
	e.t.Helper()
	switch e.kind {
	case forge.KindGitLab:
		require.Equal(e.t, http.StatusAccepted, e.sendGitLab("issue_hook_update_label_added", "Issue Hook", func(doc map[string]any) {
			oa := doc["object_attributes"].(map[string]any)
			oa["iid"], oa["title"] = 1, "Export the report as CSV"
			doc["user"].(map[string]any)["username"] = "alice"
			doc["labels"] = glLabels(e.forgejo.IssueLabels(e.issue)...)
			doc["changes"] = map[string]any{"labels": map[string]any{"previous": []any{}, "current": glLabels(e.forgejo.IssueLabels(e.issue)...)}}
		}))
	default:
		require.Equal(e.t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(e.forgejo.IssueLabels(e.issue)...)))
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
	}, 90*time.Second, 100*time.Millisecond, "no new commit on %s; comments:\n%s", branch, strings.Join(e.comments(), "\n---\n"))
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
	}, 90*time.Second, 100*time.Millisecond, "no reply to comment %d; comments:\n%s", id, strings.Join(e.comments(), "\n---\n"))
	return reply
}
