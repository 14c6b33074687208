package forgejo

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"code.gitea.io/sdk/gitea"

	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ forge.Merger = (*Client)(nil)

// MergeChecks reads what Forgejo/Gitea count before a merge of pull request number: the
// required_approvals of its target branch (GET /repos/{o}/{r}/branches/{target}, readable with
// read access, 0 for an unprotected branch), the reviewers whose latest verdict (GET
// …/pulls/{n}/reviews, every page; APPROVED or REQUEST_CHANGES, official and not dismissed —
// what Gitea's GetGrantedApprovalsCount counts) approves or requests changes, and the
// code-comment conversations (the comments of the same reviews, as ReviewComments reads them,
// threaded by path and line) none of whose comments has a resolver. The reviews are listed once.
func (c *Client) MergeChecks(ctx context.Context, repo string, number int64) (*forge.MergeChecks, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	api := c.api(ctx)
	pr, resp, err := api.GetPullRequest(owner, name, number)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get pull request %s!%d", repo, number), resp, err)
	}
	out := &forge.MergeChecks{}
	if pr.Base != nil && pr.Base.Ref != "" {
		br, resp, err := api.GetRepoBranch(owner, name, pr.Base.Ref)
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("get branch %s of %s", pr.Base.Ref, repo), resp, err)
		}
		out.ApprovalsRequired = int(br.RequiredApprovals)
	}
	reviews, err := c.pullReviews(api, owner, name, number)
	if err != nil {
		return nil, err
	}
	latest := map[string]gitea.ReviewStateType{}
	commit := map[string]string{}
	var order []string
	for _, rv := range reviews {
		if rv == nil || rv.Reviewer == nil || !rv.Official || rv.Dismissed {
			continue
		}
		if rv.State != gitea.ReviewStateApproved && rv.State != gitea.ReviewStateRequestChanges {
			continue
		}
		if _, ok := latest[rv.Reviewer.UserName]; !ok {
			order = append(order, rv.Reviewer.UserName)
		}
		latest[rv.Reviewer.UserName] = rv.State // the list is oldest first
		commit[rv.Reviewer.UserName] = rv.CommitID
	}
	for _, login := range order {
		if latest[login] == gitea.ReviewStateApproved {
			out.ApprovedBy = append(out.ApprovedBy, login)
			out.Approvals = append(out.Approvals, forge.Approval{Login: login, SHA: commit[login]})
		} else {
			out.ChangesRequested = append(out.ChangesRequested, login)
		}
	}
	out.Approved = len(out.ApprovedBy) >= out.ApprovalsRequired
	comments, err := c.commentsOfReviews(ctx, api, owner, name, number, reviews)
	if err != nil {
		return nil, err
	}
	resolved := map[string]bool{}
	var threads []string
	for _, rc := range comments {
		if rc.Position == nil {
			continue
		}
		if !slices.Contains(threads, rc.Thread) {
			threads = append(threads, rc.Thread)
		}
		resolved[rc.Thread] = resolved[rc.Thread] || rc.Resolved
	}
	for _, t := range threads {
		if !resolved[t] {
			out.OpenThreads++
		}
	}
	return out, nil
}

// Merge merges pull request number (POST /repos/{o}/{r}/pulls/{index}/merge) with Do set to the
// method ("merge", "squash", "rebase") and head_commit_id to opt.HeadSHA. A refusal keeps
// Forgejo's message: 405 (not allowed to merge, not mergeable, work in progress, required
// approvals or status checks missing), 409 (merge conflict, the head moved).
func (c *Client) Merge(ctx context.Context, repo string, number int64, opt forge.MergeOptions) error {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return err
	}
	style := gitea.MergeStyleMerge
	switch opt.Method {
	case forge.MergeSquash:
		style = gitea.MergeStyleSquash
	case forge.MergeRebase:
		style = gitea.MergeStyleRebase
	}
	// The SDK's MergePullRequest drops the answer's message on a refusal; the message is what
	// the issue is told, so the call is made with the SDK's option type but read here.
	path := fmt.Sprintf("/repos/%s/%s/pulls/%d/merge", url.PathEscape(owner), url.PathEscape(name), number)
	if _, err := c.rawJSON(ctx, http.MethodPost, path, gitea.MergePullRequestOption{Style: style, HeadCommitId: opt.HeadSHA}, nil); err != nil {
		return fmt.Errorf("merge pull request %s!%d: %w", repo, number, err)
	}
	return nil
}
