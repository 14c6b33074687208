package gitlab

import (
	"context"
	"fmt"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

var _ forge.Merger = (*Client)(nil)

// MergeChecks reads the approvals of merge request number (GET
// /projects/:id/merge_requests/:iid/approvals: approvals_required, approved, approved_by), the
// reviewers whose state is requested_changes (GET …/reviewers; GitLab Free too, where a
// request for changes does not block a merge by itself) and counts its open threads: the
// discussions (GET …/discussions, every page) with a resolvable note that is not resolved.
// GitLab Free answers the approvals call too, with no rule required.
func (c *Client) MergeChecks(ctx context.Context, repo string, number int64) (*forge.MergeChecks, error) {
	ap, resp, err := c.api.MergeRequests.GetMergeRequestApprovals(repo, number, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get the approvals of %s!%d", repo, number), resp, err)
	}
	out := &forge.MergeChecks{ApprovalsRequired: int(ap.ApprovalsRequired), Approved: ap.Approved}
	var versions []*gl.MergeRequestDiffVersion
	if len(ap.ApprovedBy) > 0 {
		versions, resp, err = c.api.MergeRequests.GetMergeRequestDiffVersions(repo, number, nil, gl.WithContext(ctx))
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("get the versions of %s!%d", repo, number), resp, err)
		}
	}
	for _, a := range ap.ApprovedBy {
		if a != nil && a.User != nil {
			out.ApprovedBy = append(out.ApprovedBy, a.User.Username)
			out.Approvals = append(out.Approvals, forge.Approval{Login: a.User.Username, SHA: approvedHead(versions, a.ApprovedAt)})
		}
	}
	reviewers, resp, err := c.api.MergeRequests.GetMergeRequestReviewers(repo, number, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get the reviewers of %s!%d", repo, number), resp, err)
	}
	for _, r := range reviewers {
		if r != nil && r.User != nil && r.State == "requested_changes" {
			out.ChangesRequested = append(out.ChangesRequested, r.User.Username)
		}
	}
	list, err := c.mrDiscussions(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	for _, d := range list {
		for _, n := range d.Notes {
			if n != nil && n.Resolvable && !n.Resolved {
				out.OpenThreads++
				break
			}
		}
	}
	return out, nil
}

// Merge merges merge request number (PUT /projects/:id/merge_requests/:iid/merge) with sha set
// to opt.HeadSHA when given and squash for forge.MergeSquash; the other methods merge the way
// the project's merge method says. A refusal keeps GitLab's message: 405 (not mergeable: draft,
// pipeline, approvals, threads), 406 or 422 (Branch cannot be merged), 409 (SHA does not match
// HEAD of source branch), 401 (may not merge). A 5xx is not retried (forgehttp.ApplyOnce):
// GitLab may have merged before the answer was lost, and the repeat would answer 405.
func (c *Client) Merge(ctx context.Context, repo string, number int64, opt forge.MergeOptions) error {
	o := &gl.AcceptMergeRequestOptions{}
	if opt.HeadSHA != "" {
		o.SHA = gl.Ptr(opt.HeadSHA)
	}
	if opt.Method == forge.MergeSquash {
		o.Squash = gl.Ptr(true)
	}
	_, resp, err := c.api.MergeRequests.AcceptMergeRequest(repo, number, o, gl.WithContext(forgehttp.ApplyOnce(ctx)))
	if err != nil {
		return c.wrap(fmt.Sprintf("merge %s!%d", repo, number), resp, err)
	}
	return nil
}

// approvedHead returns the head an approval given at `at` was given on: the head_commit_sha of
// the latest diff version created at or before it; "" when GitLab gives no time or no version
// is that old (the approval then counts for no head).
func approvedHead(versions []*gl.MergeRequestDiffVersion, at *time.Time) string {
	if at == nil {
		return ""
	}
	var head string
	var when time.Time
	for _, v := range versions {
		if v == nil || v.CreatedAt == nil || v.CreatedAt.After(*at) {
			continue
		}
		if head == "" || !v.CreatedAt.Before(when) {
			head, when = v.HeadCommitSHA, *v.CreatedAt
		}
	}
	return head
}
