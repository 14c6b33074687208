package gitlab

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

var _ forge.Reviews = (*Client)(nil)

// ReviewComments lists every note of every discussion of merge request number (GET
// /projects/:id/merge_requests/:iid/discussions, every page), oldest first, without system
// notes. Thread is the discussion id; a diff note carries its position, a general note none.
// ReviewState is "commented": GitLab keeps no verdict on a note.
func (c *Client) ReviewComments(ctx context.Context, repo string, number int64) ([]forge.ReviewComment, error) {
	list, err := c.mrDiscussions(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	var out []forge.ReviewComment
	for _, d := range list {
		for _, n := range d.Notes {
			if n == nil || n.System || n.Internal || n.Confidential { // an internal note is for members alone
				continue
			}
			out = append(out, clientReviewComment(d.ID, n))
		}
	}
	slices.SortStableFunc(out, func(a, b forge.ReviewComment) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// mrDiscussions lists every discussion of merge request number (GET …/discussions, every
// page).
func (c *Client) mrDiscussions(ctx context.Context, repo string, number int64) ([]*gl.Discussion, error) {
	list, resp, err := clientAllPages(func(page gl.RequestOptionFunc) ([]*gl.Discussion, *gl.Response, error) {
		return c.api.Discussions.ListMergeRequestDiscussions(repo, number,
			&gl.ListMergeRequestDiscussionsOptions{ListOptions: gl.ListOptions{PerPage: 100}}, clientReqOpts(ctx, page)...)
	})
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("list discussions of %s!%d", repo, number), resp, err)
	}
	return list, nil
}

func clientReviewComment(thread string, n *gl.Note) forge.ReviewComment {
	rc := forge.ReviewComment{
		ID: n.ID, Thread: thread, ReviewState: "commented",
		Author: forge.User{ID: n.Author.ID, Login: n.Author.Username}, Body: n.Body, Resolved: n.Resolved,
	}
	if n.Resolved {
		rc.ResolvedBy = n.ResolvedBy.Username
	}
	if n.CreatedAt != nil {
		rc.CreatedAt = n.CreatedAt.UTC()
	}
	if n.Type == gl.DiffNote {
		rc.Position = clientPosition(n.Position)
	}
	return rc
}

// Reply adds a note to to's discussion (POST …/discussions/:id/notes); a comment without a
// thread is answered with a merge request note.
func (c *Client) Reply(ctx context.Context, repo string, number int64, to forge.ReviewComment, body string) (int64, error) {
	if to.Thread == "" {
		return c.Comment(ctx, forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}, body)
	}
	n, resp, err := c.api.Discussions.AddMergeRequestDiscussionNote(repo, number, to.Thread,
		&gl.AddMergeRequestDiscussionNoteOptions{Body: &body}, gl.WithContext(ctx))
	if err != nil {
		return 0, c.wrap(fmt.Sprintf("reply in discussion %s of %s!%d", to.Thread, repo, number), resp, err)
	}
	return n.ID, nil
}

// ResolveThread resolves the discussion (PUT …/discussions/:id?resolved=true). Resolving a
// resolved discussion is not an error.
func (c *Client) ResolveThread(ctx context.Context, repo string, number int64, thread string) error {
	_, resp, err := c.api.Discussions.ResolveMergeRequestDiscussion(repo, number, thread,
		&gl.ResolveMergeRequestDiscussionOptions{Resolved: gl.Ptr(true)}, gl.WithContext(ctx))
	if err != nil {
		return c.wrap(fmt.Sprintf("resolve discussion %s of %s!%d", thread, repo, number), resp, err)
	}
	return nil
}

// PostReview reads the merge request's diff_refs, opens one discussion with a text position
// per inline comment (POST …/discussions with base_sha, start_sha, head_sha, new_path, old_path
// and new_line or old_line), then posts the body as a merge request note and returns its id.
// ReviewApprove also approves (POST …/approve), after the note; an approval with neither body
// nor comment is the approval alone (no note, id 0). ReviewRequestChanges has no call of its own
// and is said in the body. GitLab answers 400 for a position outside the diff; that error
// wraps forge.ErrConflict.
func (c *Client) PostReview(ctx context.Context, repo string, number int64, r forge.NewReview) (int64, error) {
	mr, resp, err := c.api.MergeRequests.GetMergeRequest(repo, number, nil, gl.WithContext(ctx))
	if err != nil {
		return 0, c.wrap(fmt.Sprintf("get merge request %s!%d", repo, number), resp, err)
	}
	refs := mr.DiffRefs
	head := cmp.Or(r.HeadSHA, refs.HeadSha)
	for _, cm := range r.Comments {
		p := cm.Position
		pos := &gl.PositionOptions{
			BaseSHA: gl.Ptr(refs.BaseSha), StartSHA: gl.Ptr(refs.StartSha), HeadSHA: gl.Ptr(head),
			PositionType: gl.Ptr("text"), NewPath: gl.Ptr(p.Path), OldPath: gl.Ptr(cmp.Or(p.OldPath, p.Path)),
		}
		if p.NewLine > 0 {
			pos.NewLine = gl.Ptr(int64(p.NewLine))
		}
		if p.OldLine > 0 {
			pos.OldLine = gl.Ptr(int64(p.OldLine))
		}
		_, resp, err := c.api.Discussions.CreateMergeRequestDiscussion(repo, number, &gl.CreateMergeRequestDiscussionOptions{
			Body: gl.Ptr(cm.Body), Position: pos,
		}, gl.WithContext(ctx))
		if err != nil {
			status := clientStatus(resp, err)
			if status == http.StatusBadRequest { // GitLab's answer for a line outside the diff
				status = http.StatusUnprocessableEntity
			}
			return 0, forgehttp.NewError("gitlab", fmt.Sprintf("comment on %s at %s of %s!%d", p.Path, clientLine(p), repo, number), status, err, c.token)
		}
	}
	var id int64
	if r.Body != "" || len(r.Comments) > 0 || r.Event != forge.ReviewApprove {
		body := r.Body
		if body == "" {
			body = "Review: see the comments on the diff."
		}
		if id, err = c.Comment(ctx, forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}, body); err != nil {
			return 0, err
		}
	}
	if r.Event == forge.ReviewApprove {
		_, resp, err := c.api.MergeRequestApprovals.ApproveMergeRequest(repo, number, &gl.ApproveMergeRequestOptions{}, gl.WithContext(ctx))
		if err != nil {
			return 0, c.wrap(fmt.Sprintf("approve %s!%d", repo, number), resp, err)
		}
	}
	return id, nil
}

func clientLine(p forge.Position) string {
	if p.NewLine > 0 {
		return fmt.Sprintf("line %d", p.NewLine)
	}
	return fmt.Sprintf("old line %d", p.OldLine)
}
