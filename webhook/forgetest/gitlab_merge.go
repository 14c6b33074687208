package forgetest

import (
	"net/http"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// glApprovals is GET …/merge_requests/:iid/approvals: approvals_required from the target
// branch's rule, approvals_left, approved and approved_by, as GitLab answers them.
func (s *GitLabServer) glApprovals(w http.ResponseWriter, p *modelRepo, mi *modelIssue) {
	c := s.mergeChecksLocked(p, mi)
	by := []any{}
	for _, login := range c.ApprovedBy {
		entry := map[string]any{"user": s.glUser(s.userLocked(login))}
		if at, ok := mi.approvedAt[login]; ok {
			entry["approved_at"] = at.UTC().Format(time.RFC3339)
		}
		by = append(by, entry)
	}
	glJSON(w, http.StatusOK, map[string]any{
		"id": mi.id, "iid": mi.number, "state": glState(mi), "approved": c.Approved,
		"approvals_required": c.ApprovalsRequired, "approvals_left": max(0, c.ApprovalsRequired-len(c.ApprovedBy)),
		"approved_by": by, "user_has_approved": slices.Contains(c.ApprovedBy, BotLogin), "user_can_approve": true,
	})
}

// glReviewers is GET …/merge_requests/:iid/reviewers: each reviewer with its state
// (requested_changes or approved, its latest verdict), as GitLab answers it.
func (s *GitLabServer) glReviewers(w http.ResponseWriter, mi *modelIssue) {
	out := []any{}
	for _, login := range mi.reviewerOrder {
		out = append(out, map[string]any{"user": s.glUser(s.userLocked(login)), "state": mi.reviewerStates[login],
			"created_at": mi.updated.UTC().Format(time.RFC3339)})
	}
	glJSON(w, http.StatusOK, out)
}

// glMerge is PUT …/merge_requests/:iid/merge with sha and squash: the merge request merged, or
// GitLab's refusal (see mergeLocked).
func (s *GitLabServer) glMerge(w http.ResponseWriter, r *http.Request, p *modelRepo, mi *modelIssue) {
	raw, err := glBody(r)
	if err != nil {
		glJSON(w, http.StatusBadRequest, map[string]any{"error": "body is not JSON"})
		return
	}
	sha, _ := glString(raw, "sha")
	opt := forge.MergeOptions{HeadSHA: sha, Method: forge.MergeCommit}
	if squash, _ := glString(raw, "squash"); squash == "true" {
		opt.Method = forge.MergeSquash
	}
	if status, msg := s.mergeLocked(p, mi, opt); status != 0 {
		glMessage(w, status, msg)
		return
	}
	glJSON(w, http.StatusOK, s.glIssueJSON(p, mi))
}

// glVersions is GET …/merge_requests/:iid/versions: the diff versions, newest first, each with
// its head_commit_sha and created_at, as GitLab answers them.
func (s *GitLabServer) glVersions(w http.ResponseWriter, mi *modelIssue) {
	out := []any{}
	for i := len(mi.versions) - 1; i >= 0; i-- {
		v := mi.versions[i]
		out = append(out, map[string]any{"id": v.id, "head_commit_sha": v.sha, "base_commit_sha": "",
			"start_commit_sha": "", "created_at": v.made.UTC().Format(time.RFC3339), "merge_request_id": mi.id,
			"state": "collected", "real_size": "1"})
	}
	glJSON(w, http.StatusOK, out)
}
