package forgetest

import (
	"net/http"
	"slices"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// glApprovals is GET …/merge_requests/:iid/approvals: approvals_required from the target
// branch's rule, approvals_left, approved and approved_by, as GitLab answers them.
func (s *GitLabServer) glApprovals(w http.ResponseWriter, p *modelRepo, mi *modelIssue) {
	c := s.mergeChecksLocked(p, mi)
	by := []any{}
	for _, login := range c.ApprovedBy {
		by = append(by, map[string]any{"user": s.glUser(s.userLocked(login))})
	}
	glJSON(w, http.StatusOK, map[string]any{
		"id": mi.id, "iid": mi.number, "state": glState(mi), "approved": c.Approved,
		"approvals_required": c.ApprovalsRequired, "approvals_left": max(0, c.ApprovalsRequired-len(c.ApprovedBy)),
		"approved_by": by, "user_has_approved": slices.Contains(c.ApprovedBy, BotLogin), "user_can_approve": true,
	})
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
