package forgejo

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// Issue reads an issue or pull request by index (GET /repos/{o}/{r}/issues/{index}).
func (c *Client) Issue(ctx context.Context, ref forge.IssueRef) (*forge.Issue, error) {
	gi, err := c.issue(ctx, ref)
	if err != nil {
		return nil, err
	}
	return clientIssue(ref, gi), nil
}

// clientIssue converts an SDK issue; ref names it.
func clientIssue(ref forge.IssueRef, gi *gitea.Issue) *forge.Issue {
	is := &forge.Issue{
		Ref: ref, Title: gi.Title, Body: gi.Body, State: string(gi.State), WebURL: gi.HTMLURL,
		Labels: []string{}, Assignees: []string{}, UpdatedAt: gi.Updated,
	}
	if gi.Poster != nil {
		is.Author = forge.User{ID: gi.Poster.ID, Login: gi.Poster.UserName}
	}
	for _, l := range gi.Labels {
		is.Labels = append(is.Labels, l.Name)
	}
	for _, a := range gi.Assignees {
		is.Assignees = append(is.Assignees, a.UserName)
	}
	return is
}

func (c *Client) issue(ctx context.Context, ref forge.IssueRef) (*gitea.Issue, error) {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return nil, err
	}
	gi, resp, err := c.api(ctx).GetIssue(owner, name, ref.Number)
	if err != nil {
		return nil, c.wrap("get issue "+ref.String(), resp, err)
	}
	return gi, nil
}

// SetIssueBody replaces the issue (or pull request) description (PATCH …/issues/{index}).
func (c *Client) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	_, resp, err := c.api(ctx).EditIssue(owner, name, ref.Number, gitea.EditIssueOption{Body: &body})
	if err != nil {
		return c.wrap("set description of "+ref.String(), resp, err)
	}
	return nil
}

// Comments lists the comments of the issue or pull request oldest first
// (GET …/issues/{index}/comments, only plain comments), following Link rel="next" while the
// server paginates (Forgejo itself returns them all at once).
func (c *Client) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	return c.CommentsSince(ctx, ref, time.Time{})
}

// CommentsSince lists the comments created or edited at or after since, oldest first
// (GET …/issues/{index}/comments?since=, RFC 3339 in whole seconds; Forgejo compares the
// comment's updated time), following pages as Comments does.
func (c *Client) CommentsSince(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Comment, error) {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return nil, err
	}
	api := c.api(ctx)
	var out []forge.Comment
	for page := 1; ; {
		list, resp, err := api.ListIssueComments(owner, name, ref.Number, gitea.ListIssueCommentOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}, Since: since,
		})
		if err != nil {
			return nil, c.wrap("list comments of "+ref.String(), resp, err)
		}
		for _, cm := range list {
			fc := forge.Comment{ID: cm.ID, Body: cm.Body, CreatedAt: cm.Created, UpdatedAt: cm.Updated}
			if cm.Poster != nil {
				fc.Author = forge.User{ID: cm.Poster.ID, Login: cm.Poster.UserName}
			}
			out = append(out, fc)
		}
		if !morePages(respHeader(resp), page, len(list), len(out)) {
			break
		}
		page++
	}
	forgehttp.SortComments(out)
	return out, nil
}

// Comment posts a comment on the issue or pull request and returns its id.
func (c *Client) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return 0, err
	}
	cm, resp, err := c.api(ctx).CreateIssueComment(owner, name, ref.Number, gitea.CreateIssueCommentOption{Body: body})
	if err != nil {
		return 0, c.wrap("comment on "+ref.String(), resp, err)
	}
	return cm.ID, nil
}

// EditComment replaces a comment's body (PATCH …/issues/comments/{id}; the id is repository
// wide, ref.Number is not sent).
func (c *Client) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	_, resp, err := c.api(ctx).EditIssueComment(owner, name, id, gitea.EditIssueCommentOption{Body: body})
	if err != nil {
		return c.wrap(fmt.Sprintf("edit comment %d of %s", id, ref), resp, err)
	}
	return nil
}

// SetLabels reads the issue's labels, removes each present label of remove
// (DELETE …/issues/{index}/labels/{id}) and adds the absent ones of add
// (POST …/issues/{index}/labels with ids). Names resolve as in EnsureLabels, which creates the
// missing ones first. A name in both add and remove is added.
func (c *Client) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	add, remove = forgehttp.LabelChange(add, remove)
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	gi, err := c.issue(ctx, ref)
	if err != nil {
		return err
	}
	present := map[string]int64{}
	for _, l := range gi.Labels {
		present[l.Name] = l.ID
	}
	api := c.api(ctx)
	for _, n := range remove {
		id, ok := present[n]
		if !ok {
			continue
		}
		resp, err := api.DeleteIssueLabel(owner, name, ref.Number, id)
		if err != nil && clientStatus(resp) != http.StatusNotFound { // 404: removed meanwhile
			return c.wrap(fmt.Sprintf("remove label %q from %s", n, ref), resp, err)
		}
	}
	var missing []string
	for _, n := range add {
		if _, ok := present[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ids, err := c.ensureLabelIDs(ctx, owner, name, missing)
	if err != nil {
		return err
	}
	if _, resp, err := api.AddIssueLabels(owner, name, ref.Number, gitea.IssueLabelsOption{Labels: ids}); err != nil {
		return c.wrap("add labels to "+ref.String(), resp, err)
	}
	return nil
}

// EnsureLabels creates, with LabelColor, the names that exist neither as labels of the
// repository (GET /repos/{o}/{r}/labels, every page) nor, for an organisation's repository, as
// labels of the organisation (GET /orgs/{org}/labels, every page): one
// POST /repos/{o}/{r}/labels each. Existing labels are not modified; empty and repeated names
// are skipped, and no names makes no request. Forgejo does not refuse a duplicate name, so two
// concurrent calls may both create a label.
func (c *Client) EnsureLabels(ctx context.Context, repo string, names []string) error {
	names = forgehttp.Uniq(names)
	if len(names) == 0 {
		return nil
	}
	owner, name, err := clientSplit(repo)
	if err != nil {
		return err
	}
	_, err = c.ensureLabelIDs(ctx, owner, name, names)
	return err
}

// ensureLabelIDs resolves names to label ids, repository labels first, then organisation
// labels, creating the ones found in neither as repository labels with LabelColor.
func (c *Client) ensureLabelIDs(ctx context.Context, owner, name string, names []string) ([]int64, error) {
	api := c.api(ctx)
	known := map[string]int64{}
	seen := 0
	for page := 1; ; {
		list, resp, err := api.ListRepoLabels(owner, name, gitea.ListLabelsOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}})
		if err != nil {
			return nil, c.wrap("list labels of "+owner+"/"+name, resp, err)
		}
		for _, l := range list {
			known[l.Name] = l.ID
		}
		seen += len(list)
		if !morePages(respHeader(resp), page, len(list), seen) {
			break
		}
		page++
	}
	if slices.ContainsFunc(names, func(n string) bool { _, ok := known[n]; return !ok }) {
		// Organisation labels; a user-owned repository answers 404.
		orgSeen := 0
		for page := 1; ; {
			list, resp, err := api.ListOrgLabels(owner, gitea.ListOrgLabelsOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}})
			if err != nil {
				if clientStatus(resp) == http.StatusNotFound {
					break
				}
				return nil, c.wrap("list labels of organisation "+owner, resp, err)
			}
			for _, l := range list {
				if _, ok := known[l.Name]; !ok {
					known[l.Name] = l.ID
				}
			}
			orgSeen += len(list)
			if !morePages(respHeader(resp), page, len(list), orgSeen) {
				break
			}
			page++
		}
	}
	ids := make([]int64, 0, len(names))
	for _, n := range names {
		if id, ok := known[n]; ok {
			ids = append(ids, id)
			continue
		}
		l, resp, err := api.CreateLabel(owner, name, gitea.CreateLabelOption{Name: n, Color: LabelColor})
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("create label %q in %s/%s", n, owner, name), resp, err)
		}
		ids = append(ids, l.ID)
	}
	return ids, nil
}

// SetAssignees reads the current assignees and, when the set changes, sends the full new list
// (PATCH …/issues/{index} with "assignees"). An added login that does not exist
// (GET /users/{login} is 404) is an error wrapping forge.ErrNotFound. A concurrent edit between
// the read and the write is overwritten.
func (c *Client) SetAssignees(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	gi, err := c.issue(ctx, ref)
	if err != nil {
		return err
	}
	var cur []string
	for _, a := range gi.Assignees {
		cur = append(cur, a.UserName)
	}
	has := func(set []string, login string) bool {
		return slices.ContainsFunc(set, func(s string) bool { return strings.EqualFold(s, login) })
	}
	next := slices.DeleteFunc(slices.Clone(cur), func(s string) bool { return has(remove, s) })
	api := c.api(ctx)
	for _, login := range forgehttp.Uniq(add) {
		if has(next, login) {
			continue
		}
		if _, resp, err := api.GetUserInfo(login); err != nil {
			return c.wrap(fmt.Sprintf("set assignees of %s: find user %q", ref, login), resp, err)
		}
		next = append(next, login)
	}
	if len(next) == len(cur) && !slices.ContainsFunc(next, func(s string) bool { return !has(cur, s) }) {
		return nil
	}
	if next == nil {
		next = []string{} // [] clears; null would leave the assignees alone
	}
	if _, resp, err := api.EditIssue(owner, name, ref.Number, gitea.EditIssueOption{Assignees: next}); err != nil {
		return c.wrap("set assignees of "+ref.String(), resp, err)
	}
	return nil
}
