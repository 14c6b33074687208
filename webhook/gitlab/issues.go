package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// Issue reads an issue, or a merge request when ref.MergeRequest. GitLab's "opened" becomes
// "open"; a merged merge request reads "closed" here (see MergeRequest for "merged").
func (c *Client) Issue(ctx context.Context, ref forge.IssueRef) (*forge.Issue, error) {
	if ref.MergeRequest {
		mr, resp, err := c.api.MergeRequests.GetMergeRequest(ref.Repo, ref.Number, nil, gl.WithContext(ctx))
		if err != nil {
			return nil, c.wrap("get merge request "+ref.String(), resp, err)
		}
		is := &forge.Issue{
			Ref: ref, Title: mr.Title, Body: mr.Description, State: clientIssueState(mr.State),
			Labels: clientNonNil(mr.Labels), WebURL: mr.WebURL, Assignees: []string{},
		}
		if mr.UpdatedAt != nil {
			is.UpdatedAt = *mr.UpdatedAt
		}
		if mr.Author != nil {
			is.Author = forge.User{ID: mr.Author.ID, Login: mr.Author.Username}
		}
		for _, a := range mr.Assignees {
			is.Assignees = append(is.Assignees, a.Username)
		}
		return is, nil
	}
	gi, resp, err := c.api.Issues.GetIssue(ref.Repo, ref.Number, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("get issue "+ref.String(), resp, err)
	}
	return clientIssue(ref, gi), nil
}

// clientIssue converts a client-go issue; ref names it.
func clientIssue(ref forge.IssueRef, gi *gl.Issue) *forge.Issue {
	is := &forge.Issue{
		Ref: ref, Title: gi.Title, Body: gi.Description, State: clientIssueState(gi.State),
		Labels: clientNonNil(gi.Labels), WebURL: gi.WebURL, Assignees: []string{},
	}
	if gi.UpdatedAt != nil {
		is.UpdatedAt = *gi.UpdatedAt
	}
	if gi.Author != nil {
		is.Author = forge.User{ID: gi.Author.ID, Login: gi.Author.Username}
	}
	for _, a := range gi.Assignees {
		is.Assignees = append(is.Assignees, a.Username)
	}
	return is
}

func clientIssueState(s string) string {
	switch s {
	case "opened", "locked":
		return "open"
	case "merged":
		return "closed"
	}
	return s
}

func clientNonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// update sends PUT /projects/:id/issues/:iid (or merge_requests/:iid) with the fields that
// both endpoints share.
func (c *Client) update(ctx context.Context, ref forge.IssueRef, op string, desc *string, add, remove *gl.LabelOptions, assignees *[]int64) error {
	if ref.MergeRequest {
		_, resp, err := c.api.MergeRequests.UpdateMergeRequest(ref.Repo, ref.Number, &gl.UpdateMergeRequestOptions{
			Description: desc, AddLabels: add, RemoveLabels: remove, AssigneeIDs: assignees,
		}, gl.WithContext(ctx))
		if err != nil {
			return c.wrap(op+" "+ref.String(), resp, err)
		}
		return nil
	}
	_, resp, err := c.api.Issues.UpdateIssue(ref.Repo, ref.Number, &gl.UpdateIssueOptions{
		Description: desc, AddLabels: add, RemoveLabels: remove, AssigneeIDs: assignees,
	}, gl.WithContext(ctx))
	if err != nil {
		return c.wrap(op+" "+ref.String(), resp, err)
	}
	return nil
}

// SetIssueBody replaces the description of the issue (or merge request).
func (c *Client) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	return c.update(ctx, ref, "set description of", &body, nil, nil, nil)
}

// Comments lists the notes of the issue (or merge request) oldest first, following every
// page (X-Next-Page / Link rel="next"), without system notes ("added label …").
func (c *Client) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	return c.CommentsSince(ctx, ref, time.Time{})
}

// CommentsSince lists the notes created or edited at or after since, oldest first, without
// system notes and internal notes (what is for the project's members alone never reaches the
// agent or Alfred's public text). GitLab's notes API has no time filter: with a since, the notes are read
// order_by=updated_at&sort=desc and paging stops at the first note edited before since, so
// an unchanged issue costs one request.
func (c *Client) CommentsSince(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Comment, error) {
	order, sort := "created_at", "asc"
	if !since.IsZero() {
		order, sort = "updated_at", "desc"
	}
	var (
		out  []forge.Comment
		page gl.RequestOptionFunc
	)
	for {
		notes, resp, err := c.notesPage(ctx, ref, order, sort, page)
		if err != nil {
			return nil, c.wrap("list notes of "+ref.String(), resp, err)
		}
		older := false
		for _, n := range notes {
			if n.UpdatedAt != nil && !since.IsZero() && n.UpdatedAt.Before(since) {
				older = true
				break
			}
			if n.System || n.Internal || n.Confidential { // an internal note is for members alone
				continue
			}
			cm := forge.Comment{ID: n.ID, Body: n.Body, Author: forge.User{ID: n.Author.ID, Login: n.Author.Username}}
			if n.CreatedAt != nil {
				cm.CreatedAt = *n.CreatedAt
			}
			if n.UpdatedAt != nil {
				cm.UpdatedAt = *n.UpdatedAt
			}
			out = append(out, cm)
		}
		next, ok := gl.WithNext(resp)
		if older || !ok || len(notes) == 0 {
			break
		}
		page = next
	}
	forgehttp.SortComments(out)
	return out, nil
}

// notesPage reads one page of an issue's or merge request's notes in the given order.
func (c *Client) notesPage(ctx context.Context, ref forge.IssueRef, order, sort string, page gl.RequestOptionFunc) ([]*gl.Note, *gl.Response, error) {
	reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
	if page != nil {
		reqOpts = append(reqOpts, page)
	}
	lo := gl.ListOptions{PerPage: 100}
	if ref.MergeRequest {
		return c.api.Notes.ListMergeRequestNotes(ref.Repo, ref.Number, &gl.ListMergeRequestNotesOptions{
			ListOptions: lo, OrderBy: gl.Ptr(order), Sort: gl.Ptr(sort),
		}, reqOpts...)
	}
	return c.api.Notes.ListIssueNotes(ref.Repo, ref.Number, &gl.ListIssueNotesOptions{
		ListOptions: lo, OrderBy: gl.Ptr(order), Sort: gl.Ptr(sort),
	}, reqOpts...)
}

// Comment posts a note on the issue (or merge request) and returns the note id.
func (c *Client) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	var (
		n    *gl.Note
		resp *gl.Response
		err  error
	)
	if ref.MergeRequest {
		n, resp, err = c.api.Notes.CreateMergeRequestNote(ref.Repo, ref.Number, &gl.CreateMergeRequestNoteOptions{Body: &body}, gl.WithContext(ctx))
	} else {
		n, resp, err = c.api.Notes.CreateIssueNote(ref.Repo, ref.Number, &gl.CreateIssueNoteOptions{Body: &body}, gl.WithContext(ctx))
	}
	if err != nil {
		return 0, c.wrap("comment on "+ref.String(), resp, err)
	}
	return n.ID, nil
}

// EditComment replaces the body of note id on the issue (or merge request).
func (c *Client) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	var (
		resp *gl.Response
		err  error
	)
	if ref.MergeRequest {
		_, resp, err = c.api.Notes.UpdateMergeRequestNote(ref.Repo, ref.Number, id, &gl.UpdateMergeRequestNoteOptions{Body: &body}, gl.WithContext(ctx))
	} else {
		_, resp, err = c.api.Notes.UpdateIssueNote(ref.Repo, ref.Number, id, &gl.UpdateIssueNoteOptions{Body: &body}, gl.WithContext(ctx))
	}
	if err != nil {
		return c.wrap(fmt.Sprintf("edit note %d of %s", id, ref), resp, err)
	}
	return nil
}

// SetLabels adds and removes labels by name in one update (add_labels / remove_labels). Before
// that it creates the missing project labels with EnsureLabels: GitLab would create them too,
// but doing it here makes the outcome explicit. A name in both add and remove is added. Note
// that on GitLab Premium adding a scoped label ("a::b") removes the other labels of its scope.
func (c *Client) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	add, remove = forgehttp.LabelChange(add, remove)
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	if err := c.EnsureLabels(ctx, ref.Repo, add); err != nil {
		return err
	}
	var a, r *gl.LabelOptions
	if len(add) > 0 {
		a = (*gl.LabelOptions)(&add)
	}
	if len(remove) > 0 {
		r = (*gl.LabelOptions)(&remove)
	}
	return c.update(ctx, ref, "set labels of", nil, a, r, nil)
}

// EnsureLabels creates, with LabelColor, the names that neither the project nor its ancestor
// groups have: it lists the labels available to the project (GET /projects/:id/labels with
// include_ancestor_groups, every page), then creates each missing one as a project label
// (POST /projects/:id/labels). A 409 "Label already exists" (created meanwhile) counts as
// success. Existing labels are not modified; empty and repeated names are skipped, and no
// names makes no request.
func (c *Client) EnsureLabels(ctx context.Context, repo string, names []string) error {
	names = forgehttp.Uniq(names)
	if len(names) == 0 {
		return nil
	}
	have := map[string]bool{}
	var page gl.RequestOptionFunc
	for {
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		labels, resp, err := c.api.Labels.ListLabels(repo, &gl.ListLabelsOptions{
			ListOptions: gl.ListOptions{PerPage: 100}, IncludeAncestorGroups: gl.Ptr(true),
		}, reqOpts...)
		if err != nil {
			return c.wrap("list labels of "+repo, resp, err)
		}
		for _, l := range labels {
			have[l.Name] = true
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(labels) == 0 {
			break
		}
		page = next
	}
	for _, n := range names {
		if have[n] {
			continue
		}
		_, resp, err := c.api.Labels.CreateLabel(repo, &gl.CreateLabelOptions{Name: gl.Ptr(n), Color: gl.Ptr(LabelColor)}, gl.WithContext(ctx))
		if err != nil && clientStatus(resp, err) != http.StatusConflict { // 409: created meanwhile
			return c.wrap(fmt.Sprintf("create label %q in %s", n, repo), resp, err)
		}
	}
	return nil
}

// SetAssignees reads the current assignees, resolves the added logins to user ids
// (GET /users?username=) and sends the resulting full set as assignee_ids (an empty set as
// [0], GitLab's "unassign all"). An unknown login is an error wrapping forge.ErrNotFound.
// GitLab Free keeps only the first assignee. A concurrent edit between the read and the write
// is overwritten.
func (c *Client) SetAssignees(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	type assignee struct {
		id    int64
		login string
	}
	var cur []assignee
	if ref.MergeRequest {
		mr, resp, err := c.api.MergeRequests.GetMergeRequest(ref.Repo, ref.Number, nil, gl.WithContext(ctx))
		if err != nil {
			return c.wrap("get merge request "+ref.String(), resp, err)
		}
		for _, a := range mr.Assignees {
			cur = append(cur, assignee{a.ID, a.Username})
		}
	} else {
		gi, resp, err := c.api.Issues.GetIssue(ref.Repo, ref.Number, gl.WithContext(ctx))
		if err != nil {
			return c.wrap("get issue "+ref.String(), resp, err)
		}
		for _, a := range gi.Assignees {
			cur = append(cur, assignee{a.ID, a.Username})
		}
	}
	has := func(set []assignee, login string) bool {
		return slices.ContainsFunc(set, func(a assignee) bool { return strings.EqualFold(a.login, login) })
	}
	next := slices.DeleteFunc(slices.Clone(cur), func(a assignee) bool {
		return slices.ContainsFunc(remove, func(r string) bool { return strings.EqualFold(r, a.login) })
	})
	for _, login := range forgehttp.Uniq(add) {
		if has(next, login) {
			continue
		}
		id, ok, err := c.userID(ctx, login)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("gitlab: set assignees of %s: user %q: %w", ref, login, forge.ErrNotFound)
		}
		next = append(next, assignee{id, login})
	}
	if len(next) == len(cur) && !slices.ContainsFunc(next, func(a assignee) bool { return !has(cur, a.login) }) {
		return nil
	}
	ids := []int64{0}
	if len(next) > 0 {
		ids = ids[:0]
		for _, a := range next {
			ids = append(ids, a.id)
		}
	}
	return c.update(ctx, ref, "set assignees of", nil, nil, nil, &ids)
}
