package forgejo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"code.gitea.io/sdk/gitea"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

var _ forge.Reviews = (*Client)(nil)

// ReviewComments lists every submitted review of pull request number (GET …/pulls/{n}/reviews,
// every page) and each review's code comments (GET …/pulls/{n}/reviews/{id}/comments), oldest
// first. REQUEST_REVIEW rows (a review request is stored as a review) and PENDING drafts are
// skipped. A review's non-empty body becomes a comment without position whose ID is that of the
// review's summary comment (see clientSummaryID) and whose Thread is "review:<review id>". A code comment's Thread is "<path>:+<line>" for a line of
// the new file (Forgejo's position) or "<path>:-<line>" for one of the old file; its Resolved is
// true when Forgejo names a resolver. The comments of a review may be by other users than the
// review's author (Reply adds the bot's answers to the reviewer's review).
func (c *Client) ReviewComments(ctx context.Context, repo string, number int64) ([]forge.ReviewComment, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	api := c.api(ctx)
	reviews, err := c.pullReviews(api, owner, name, number)
	if err != nil {
		return nil, err
	}
	return c.commentsOfReviews(ctx, api, owner, name, number, reviews)
}

// pullReviews lists every review of pull request number of owner/name (GET
// …/pulls/{n}/reviews, every page), oldest first.
func (c *Client) pullReviews(api *gitea.Client, owner, name string, number int64) ([]*gitea.PullReview, error) {
	var all []*gitea.PullReview
	for page := 1; ; {
		list, resp, err := api.ListPullReviews(owner, name, number, gitea.ListPullReviewsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize},
		})
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("list reviews of %s/%s!%d", owner, name, number), resp, err)
		}
		all = append(all, list...)
		if !morePages(respHeader(resp), page, len(list), len(all)) {
			return all, nil
		}
		page++
	}
}

// commentsOfReviews is ReviewComments of the reviews already listed.
func (c *Client) commentsOfReviews(ctx context.Context, api *gitea.Client, owner, name string, number int64, reviews []*gitea.PullReview) ([]forge.ReviewComment, error) {
	var out []forge.ReviewComment
	for _, rv := range reviews {
		if rv == nil || rv.State == gitea.ReviewStateRequestReview || rv.State == gitea.ReviewStatePending {
			continue
		}
		cs, err := c.reviewComments(ctx, api, owner, name, number, rv)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	slices.SortStableFunc(out, func(a, b forge.ReviewComment) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

func (c *Client) reviewComments(ctx context.Context, api *gitea.Client, owner, name string, number int64, rv *gitea.PullReview) ([]forge.ReviewComment, error) {
	state := clientReviewState(rv.State)
	var out []forge.ReviewComment
	if rv.Body != "" {
		out = append(out, forge.ReviewComment{
			ID: clientSummaryID(rv), Thread: "review:" + strconv.FormatInt(rv.ID, 10), ReviewID: rv.ID, ReviewState: state,
			Author: clientUser(rv.Reviewer), Body: rv.Body, CreatedAt: rv.Submitted.UTC(),
		})
	}
	if rv.CodeCommentsCount == 0 {
		return out, nil
	}
	list, resp, err := api.ListPullReviewComments(owner, name, number, rv.ID)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("list comments of review %d on %s/%s!%d", rv.ID, owner, name, number), resp, err)
	}
	for _, cm := range list {
		if cm == nil {
			continue
		}
		pos := &forge.Position{Path: cm.Path, NewLine: int(cm.LineNum), OldLine: int(cm.OldLineNum)}
		out = append(out, forge.ReviewComment{
			ID: cm.ID, Thread: pos.Key(), ReviewID: rv.ID, ReviewState: state,
			Author: clientUser(cm.Reviewer), Body: cm.Body, CreatedAt: cm.Created.UTC(),
			Position: pos, DiffHunk: cm.DiffHunk, Resolved: cm.Resolver != nil,
		})
		if cm.Resolver != nil {
			out[len(out)-1].ResolvedBy = cm.Resolver.UserName
		}
	}
	return out, nil
}

// clientSummaryID is the id of a review's summary comment: the comment anchor of its html_url
// ("…/pulls/2#issuecomment-5"), which shares the id sequence of the inline comments; the
// negated review id when the URL has none.
func clientSummaryID(rv *gitea.PullReview) int64 {
	if _, frag, ok := strings.Cut(rv.HTMLURL, "#issuecomment-"); ok {
		if id, err := strconv.ParseInt(frag, 10, 64); err == nil && id > 0 {
			return id
		}
	}
	return -rv.ID
}

func clientReviewState(s gitea.ReviewStateType) string {
	switch s {
	case gitea.ReviewStateApproved:
		return "approved"
	case gitea.ReviewStateRequestChanges:
		return "changes_requested"
	default:
		return "commented"
	}
}

func clientUser(u *gitea.User) forge.User {
	if u == nil {
		return forge.User{}
	}
	return forge.User{ID: u.ID, Login: u.UserName}
}

// Reply answers a review comment. A comment without position is answered with a pull request
// comment. A code comment is answered by adding a comment to its review at the same path and
// line (POST …/pulls/{n}/reviews/{id}/comments, Forgejo; it sends no webhook); when the server
// has no such call (Gitea answers 404 or 405), by a new comment-only review with one inline
// comment at that path and line, which the web UI shows in the same conversation.
func (c *Client) Reply(ctx context.Context, repo string, number int64, to forge.ReviewComment, body string) (int64, error) {
	if to.Position == nil || to.ReviewID == 0 {
		return c.Comment(ctx, forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}, body)
	}
	owner, name, err := clientSplit(repo)
	if err != nil {
		return 0, err
	}
	in := clientNewComment(*to.Position, body)
	var created gitea.PullReviewComment
	path := fmt.Sprintf("/repos/%s/%s/pulls/%d/reviews/%d/comments", owner, name, number, to.ReviewID)
	status, err := c.rawJSON(ctx, http.MethodPost, path, in, &created)
	switch {
	case err == nil:
		return created.ID, nil
	case status != http.StatusNotFound && status != http.StatusMethodNotAllowed:
		return 0, err
	}
	// No reply call on this server: a review of its own at the same place.
	id, err := c.PostReview(ctx, repo, number, forge.NewReview{
		Comments: []forge.NewReviewComment{{Position: *to.Position, Body: body}},
	})
	if err != nil {
		return 0, err
	}
	cs, resp, err := c.api(ctx).ListPullReviewComments(owner, name, number, id)
	if err != nil {
		return 0, c.wrap(fmt.Sprintf("list comments of review %d on %s!%d", id, repo, number), resp, err)
	}
	if len(cs) == 0 || cs[0] == nil {
		return 0, fmt.Errorf("forgejo: reply to comment %d on %s!%d: review %d has no comment", to.ID, repo, number, id)
	}
	return cs[0].ID, nil
}

// ResolveThread does nothing: Forgejo 15 and Gitea 1.25 have no API call to resolve a
// conversation.
func (c *Client) ResolveThread(context.Context, string, int64, string) error { return nil }

// PostReview submits one review with its inline comments (POST …/pulls/{n}/reviews, event
// COMMENT unless r.Event says APPROVED or REQUEST_CHANGES) and returns the review id. A comment
// on a line of the new file sets new_position, one on a removed line old_position. Forgejo
// answers 422 for a comment without path or line (forge.ErrConflict); Gitea 1.25 accepts a line
// outside the diff and stores it.
func (c *Client) PostReview(ctx context.Context, repo string, number int64, r forge.NewReview) (int64, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return 0, err
	}
	in := gitea.CreatePullReviewOptions{State: gitea.ReviewStateComment, Body: r.Body, CommitID: r.HeadSHA}
	switch r.Event {
	case forge.ReviewApprove:
		in.State = gitea.ReviewStateApproved
	case forge.ReviewRequestChanges:
		in.State = gitea.ReviewStateRequestChanges
	}
	for _, cm := range r.Comments {
		in.Comments = append(in.Comments, clientNewComment(cm.Position, cm.Body))
	}
	rv, resp, err := c.api(ctx).CreatePullReview(owner, name, number, in)
	if err != nil {
		return 0, c.wrap(fmt.Sprintf("post review on %s!%d", repo, number), resp, err)
	}
	return rv.ID, nil
}

// clientNewComment is an inline comment at p: new_position for a line of the new file, else
// old_position.
func clientNewComment(p forge.Position, body string) gitea.CreatePullReviewComment {
	c := gitea.CreatePullReviewComment{Path: p.Path, Body: body}
	if p.NewLine > 0 {
		c.NewLineNum = int64(p.NewLine)
	} else {
		c.OldLineNum = int64(p.OldLine)
	}
	return c
}

// rawJSON makes an API call the SDK lacks: method on /api/v1+path with in as JSON body, the
// answer decoded into out. It returns the HTTP status (0 without an answer) and an error
// wrapping the forge sentinel of a non-2xx status.
func (c *Client) rawJSON(ctx context.Context, method, path string, in, out any) (int, error) {
	op := method + " " + path
	b, err := json.Marshal(in)
	if err != nil {
		return 0, fmt.Errorf("forgejo: %s: encoding body: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+"/api/v1"+path, bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("forgejo: %s: %w", op, err)
	}
	req.Header.Set("Authorization", "token "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "alfred")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, forgehttp.NewError("forgejo", op, 0, err, c.token)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &msg)
		return resp.StatusCode, forgehttp.NewError("forgejo", op, resp.StatusCode, errors.New(cmp.Or(msg.Message, resp.Status)), c.token)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("forgejo: %s: decoding answer: %w", op, err)
		}
	}
	return resp.StatusCode, nil
}
