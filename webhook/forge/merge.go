package forge

import (
	"context"
	"fmt"
)

// MergeMethod is how a merge request is merged into its target.
type MergeMethod string

// The merge methods. GitLab's merge API has no per-request rebase: there MergeRebase and
// MergeCommit both merge the way the project's merge method says (merge commit, semi-linear,
// fast-forward), and only MergeSquash changes it (squash=true).
const (
	// MergeCommit merges with a merge commit (Forgejo/Gitea Do "merge").
	MergeCommit MergeMethod = "merge"
	// MergeSquash squashes the merge request's commits into one (Forgejo/Gitea Do "squash",
	// GitLab squash=true).
	MergeSquash MergeMethod = "squash"
	// MergeRebase rebases the commits onto the target (Forgejo/Gitea Do "rebase").
	MergeRebase MergeMethod = "rebase"
)

// ParseMergeMethod returns the method s names ("" is MergeCommit); an error names the valid
// ones.
func ParseMergeMethod(s string) (MergeMethod, error) {
	switch MergeMethod(s) {
	case "", MergeCommit:
		return MergeCommit, nil
	case MergeSquash, MergeRebase:
		return MergeMethod(s), nil
	}
	return "", fmt.Errorf("forge: unknown merge method %q (merge, squash or rebase)", s)
}

// MergeChecks is what a forge says, before a merge, about the approvals and the review
// threads of a merge request (spec/lifecycle.md, "Auto-merge", lists the sources).
type MergeChecks struct {
	// ApprovalsRequired is how many approvals the forge requires: GitLab approvals_required
	// (GET …/merge_requests/:iid/approvals); Forgejo/Gitea required_approvals of the target
	// branch's protection (GET /repos/{o}/{r}/branches/{target}), 0 without protection.
	ApprovalsRequired int `json:"approvals_required"`
	// ApprovedBy lists the accounts whose approval counts: GitLab approved_by; Forgejo/Gitea
	// the reviewers whose latest review is APPROVED, official and not dismissed.
	ApprovedBy []string `json:"approved_by,omitempty"`
	// Approved reports the required approvals present: GitLab approved; Forgejo/Gitea
	// len(ApprovedBy) >= ApprovalsRequired.
	Approved bool `json:"approved"`
	// ChangesRequested lists the reviewers whose latest review requests changes (Forgejo/Gitea
	// REQUEST_CHANGES, official and not dismissed); GitLab keeps no such verdict in this call.
	ChangesRequested []string `json:"changes_requested,omitempty"`
	// Approvals lists every current approval with the head it was given on, so that the caller
	// can count only the approvals of the head it merges, whatever the forge's own setting on
	// stale approvals: Forgejo/Gitea the commit_id of each reviewer's latest APPROVED review
	// (GET /repos/{o}/{r}/pulls/{index}/reviews); GitLab approved_by[].approved_at of the
	// approvals API placed among the merge request's diff versions (GET
	// …/merge_requests/:iid/versions, head_commit_sha and created_at): an approval belongs to
	// the latest version created at or before it.
	Approvals []Approval `json:"approvals,omitempty"`
	// OpenThreads counts the review threads not resolved: GitLab discussions with a resolvable
	// note not resolved; Forgejo/Gitea code-comment conversations (by path and line) none of
	// whose comments carries a resolver.
	OpenThreads int `json:"open_threads"`
}

// Approval is one approval of a merge request: who gave it, and on which head (SHA; "" when the
// forge does not say, which never counts as the current head).
type Approval struct {
	Login string `json:"login"`
	SHA   string `json:"sha,omitempty"`
}

// MergeOptions is the input of Merger.Merge.
type MergeOptions struct {
	// Method is how to merge ("" is MergeCommit).
	Method MergeMethod
	// HeadSHA, when set, is the head the caller checked: the forge refuses the merge when the
	// source branch moved since (GitLab sha, answered 409; Forgejo/Gitea head_commit_id).
	HeadSHA string
}

// Merger is the merge of a merge request through the forge's own API, so that the forge's
// rules (protected branches, required approvals and pipelines, resolved threads) apply. Both
// forge clients and the Fake implement it; it has the error contract of Forge.
type Merger interface {
	// MergeChecks reads the approvals and the open review threads of merge request number.
	MergeChecks(ctx context.Context, repo string, number int64) (*MergeChecks, error)
	// Merge merges merge request number: GitLab PUT /projects/:id/merge_requests/:iid/merge;
	// Forgejo/Gitea POST /repos/{o}/{r}/pulls/{index}/merge. A forge that refuses returns an
	// error wrapping ErrRefused (GitLab 405 not mergeable — draft, pipeline, approvals, threads
	// —, 406; Forgejo/Gitea 405 not allowed or not ready), ErrConflict (409 the head moved or a
	// conflict, 422 GitLab "Branch cannot be merged") or ErrForbidden (401/403 the account may
	// not merge into the target), with the forge's message.
	Merge(ctx context.Context, repo string, number int64, opt MergeOptions) error
}
