package forgejo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"code.gitea.io/sdk/gitea"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// CreateMergeRequest returns the open pull request whose head is mr.SourceBranch if there is
// one, else opens a new one (an empty TargetBranch means the default branch). When Forgejo
// refuses because one exists (409, or 422 on older servers) it returns that one.
func (c *Client) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	if existing, err := c.openPull(ctx, owner, name, mr.SourceBranch); err != nil || existing != nil {
		return existing, err
	}
	target, err := forgehttp.TargetBranch(ctx, c, repo, mr.TargetBranch)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.api(ctx).CreatePullRequest(owner, name, gitea.CreatePullRequestOption{
		Head: mr.SourceBranch, Base: target, Title: mr.Title, Body: mr.Body,
	})
	if err != nil {
		if s := clientStatus(resp); s == http.StatusConflict || s == http.StatusUnprocessableEntity {
			if existing, err2 := c.openPull(ctx, owner, name, mr.SourceBranch); err2 == nil && existing != nil {
				return existing, nil
			}
		}
		return nil, c.wrap("create pull request for "+mr.SourceBranch+" in "+repo, resp, err)
	}
	return clientPull(pr), nil
}

// openPull finds the open pull request with head branch in the same repository, or nil.
func (c *Client) openPull(ctx context.Context, owner, name, branch string) (*forge.MergeRequest, error) {
	api := c.api(ctx)
	seen := 0
	for page := 1; ; {
		list, resp, err := api.ListRepoPullRequests(owner, name, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}, State: gitea.StateOpen,
		})
		if err != nil {
			return nil, c.wrap("list pull requests of "+owner+"/"+name, resp, err)
		}
		for _, pr := range list {
			if pr.Head != nil && pr.Head.Ref == branch && pr.State == gitea.StateOpen && !pr.HasMerged && !pullFromFork(pr) {
				return clientPull(pr), nil
			}
		}
		seen += len(list)
		if !morePages(respHeader(resp), page, len(list), seen) {
			return nil, nil
		}
		page++
	}
}

// MergeRequest reads a pull request by index. State is "open", "closed" or "merged".
func (c *Client) MergeRequest(ctx context.Context, repo string, number int64) (*forge.MergeRequest, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.api(ctx).GetPullRequest(owner, name, number)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get pull request %s!%d", repo, number), resp, err)
	}
	return clientPull(pr), nil
}

// pullFromFork reports whether pr's head is in another repository than its base (a fork's),
// when the answer gives both.
func pullFromFork(pr *gitea.PullRequest) bool {
	return pr.Head != nil && pr.Base != nil && pr.Head.RepoID != 0 && pr.Base.RepoID != 0 && pr.Head.RepoID != pr.Base.RepoID
}

func clientPull(pr *gitea.PullRequest) *forge.MergeRequest {
	out := &forge.MergeRequest{Number: pr.Index, Title: pr.Title, Body: pr.Body, State: string(pr.State), WebURL: pr.HTMLURL}
	if pr.Updated != nil {
		out.UpdatedAt = *pr.Updated
	}
	if pr.HasMerged {
		out.State, out.Merged = "merged", true
	}
	if pr.Head != nil {
		out.SourceBranch, out.HeadSHA = pr.Head.Ref, pr.Head.Sha
	}
	if pr.Base != nil {
		out.TargetBranch = pr.Base.Ref
	}
	out.FromFork = pullFromFork(pr)
	if pr.Poster != nil {
		out.Author = forge.User{ID: pr.Poster.ID, Login: pr.Poster.UserName}
	}
	if out.State == "open" {
		// mergeable is false both for a conflict and while the check runs (and for a WIP
		// title): see forge.MergeStatusConflict.
		out.MergeStatus = forge.MergeStatusConflict
		if pr.Mergeable {
			out.MergeStatus = forge.MergeStatusMergeable
		}
	}
	return out
}

// statusPageSize is the page size statusPage asks for: Forgejo's most (MaxResponseItems).
const statusPageSize = 50

// statusPage reads page (from 1) of the statuses of commit sha: GET
// /api/v1/repos/{o}/{r}/commits/{sha}/statuses?sort=leastindex&page=…&limit=50. The SDK's
// ListStatuses cannot ask for an order, and Forgejo's default one (by creation time in whole
// seconds, no tiebreak) pages unstably when statuses share a second, as a matrix of Actions
// jobs does: some are skipped, others repeated. leastindex orders by the status's index,
// unique on the commit.
func (c *Client) statusPage(ctx context.Context, owner, name, sha string, page int) ([]*gitea.Status, error) {
	op := "list statuses of " + owner + "/" + name + "@" + sha
	u := fmt.Sprintf("%s/api/v1/repos/%s/%s/commits/%s/statuses?sort=leastindex&page=%d&limit=%d", c.baseURL,
		url.PathEscape(owner), url.PathEscape(name), url.PathEscape(sha), page, statusPageSize)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, c.wrap(op, nil, err)
	}
	req.Header.Set("Authorization", "token "+c.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "alfred")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.wrap(op, nil, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, c.wrap(op, &gitea.Response{Response: resp}, err)
	}
	if resp.StatusCode/100 != 2 {
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &msg)
		return nil, c.wrap(op, &gitea.Response{Response: resp}, errors.New(cmp.Or(msg.Message, resp.Status)))
	}
	var list []*gitea.Status
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, c.wrap(op, &gitea.Response{Response: resp}, err)
	}
	return list, nil
}

// CIStatus returns the state of CI on sha from its commit statuses, every page of them
// (statusPage): the latest status of each context (the highest id), then
// "failure" or "error" in any context is CIFailed, else "pending" in any is CIPending, else
// CISuccess ("success", "warning", "skipped"); no status at all is CINone. Forgejo's combined
// status (…/commits/{sha}/status) is not used: it computes its state over one page of contexts
// (30 by default) and ranks "warning" below "pending". For CIFailed, each failing context
// becomes a FailedJob with its context as Name, target_url as WebURL and description as Log.
func (c *Client) CIStatus(ctx context.Context, repo, sha string) (*forge.Pipeline, error) {
	if sha == "" {
		return &forge.Pipeline{State: forge.CINone}, nil // no commit, no status
	}
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	latest := map[string]*gitea.Status{}
	for page := 1; ; page++ {
		list, err := c.statusPage(ctx, owner, name, sha, page)
		if err != nil {
			return nil, err
		}
		for _, st := range list {
			if st == nil {
				continue
			}
			if cur, ok := latest[st.Context]; !ok || st.ID > cur.ID {
				latest[st.Context] = st
			}
		}
		if len(list) == 0 || page >= maxListPages {
			break // a page shorter than asked is no end: the server may cap its pages lower
		}
	}
	out := &forge.Pipeline{SHA: sha, State: forge.CINone}
	if len(latest) == 0 {
		return out, nil
	}
	failed, pending := false, false
	for _, st := range latest {
		switch st.State {
		case gitea.StatusFailure, gitea.StatusError:
			failed = true
		case gitea.StatusPending:
			pending = true
		}
	}
	switch {
	case failed:
		out.State = forge.CIFailed
	case pending:
		out.State = forge.CIPending
	default:
		out.State = forge.CISuccess
	}
	// In the order the contexts were last set, as Forgejo lists them on the commit.
	for _, st := range slices.SortedFunc(maps.Values(latest), func(a, b *gitea.Status) int { return cmp.Compare(a.ID, b.ID) }) {
		if out.WebURL == "" {
			out.WebURL = st.TargetURL
		}
		if out.State == forge.CIFailed && (st.State == gitea.StatusFailure || st.State == gitea.StatusError) {
			out.FailedJobs = append(out.FailedJobs, forge.FailedJob{Name: st.Context, WebURL: st.TargetURL, Log: st.Description})
		}
	}
	return out, nil
}
