package gitlab

import (
	"context"
	"fmt"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ forge.Poller = (*Client)(nil)

// Changes implements forge.Poller with three cross-project reads, whatever the number of
// projects:
//
//   - the bot's pending to-do items (GET /todos, newest first, read until older than since:
//     the API has no time filter): assignments, mentions, review requests, failed pipelines;
//   - the open issues assigned to the bot updated at or after since (AssignedIssues: a label
//     change or a comment makes no to-do item);
//   - the bot's merge requests updated at or after since (GET /merge_requests?scope=all
//     &author_username=…&state=all&updated_after=…): notes, reviews, merges and closes.
//
// GitLab's events API is not used: GET /events lists the bot's own actions only, and
// GET /projects/:id/events costs one request per project.
func (c *Client) Changes(ctx context.Context, since time.Time) ([]forge.Change, error) {
	out, err := c.todoChanges(ctx, since)
	if err != nil {
		return nil, err
	}
	assigned, err := c.AssignedIssues(ctx, since, 0)
	if err != nil {
		return nil, err
	}
	for _, is := range assigned {
		out = append(out, forge.Change{Ref: is.Ref, UpdatedAt: is.UpdatedAt, Source: "assigned issue"})
	}
	mrs, err := c.authoredMergeRequests(ctx, since)
	if err != nil {
		return nil, err
	}
	return append(out, mrs...), nil
}

// todoChanges reads the bot's pending to-do items newest first until one is older than since.
func (c *Client) todoChanges(ctx context.Context, since time.Time) ([]forge.Change, error) {
	opt := &gl.ListTodosOptions{ListOptions: gl.ListOptions{PerPage: 100}, State: gl.Ptr("pending")}
	var (
		out  []forge.Change
		page gl.RequestOptionFunc
	)
	for {
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		list, resp, err := c.api.Todos.ListTodos(opt, reqOpts...)
		if err != nil {
			return nil, c.wrap("list the bot's to-do items", resp, err)
		}
		for _, t := range list {
			if t.CreatedAt == nil {
				continue
			}
			if t.CreatedAt.Before(since) {
				return out, nil // newest first: the rest is older
			}
			if t.Project == nil || t.Target == nil || t.Target.IID == 0 {
				continue
			}
			var mr bool
			switch t.TargetType {
			case "Issue":
			case "MergeRequest":
				mr = true
			default:
				continue
			}
			out = append(out, forge.Change{
				Ref:       forge.IssueRef{Repo: t.Project.PathWithNamespace, Number: t.Target.IID, MergeRequest: mr},
				UpdatedAt: *t.CreatedAt, Source: fmt.Sprintf("todo %d %s", t.ID, t.ActionName),
			})
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(list) == 0 {
			return out, nil
		}
		page = next
	}
}

// authoredMergeRequests lists the bot's merge requests updated at or after since.
func (c *Client) authoredMergeRequests(ctx context.Context, since time.Time) ([]forge.Change, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return nil, err
	}
	opt := &gl.ListMergeRequestsOptions{
		ListOptions: gl.ListOptions{PerPage: 100}, AuthorUsername: gl.Ptr(bot.Login),
		State: gl.Ptr("all"), Scope: gl.Ptr("all"), OrderBy: gl.Ptr("updated_at"), Sort: gl.Ptr("desc"),
	}
	if !since.IsZero() {
		opt.UpdatedAfter = gl.Ptr(since)
	}
	var (
		out  []forge.Change
		page gl.RequestOptionFunc
	)
	for {
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		list, resp, err := c.api.MergeRequests.ListMergeRequests(opt, reqOpts...)
		if err != nil {
			return nil, c.wrap("list the bot's merge requests", resp, err)
		}
		for _, m := range list {
			if m.References == nil || m.UpdatedAt == nil {
				continue
			}
			i := strings.LastIndex(m.References.Full, "!")
			if i <= 0 {
				continue
			}
			out = append(out, forge.Change{
				Ref:       forge.IssueRef{Repo: m.References.Full[:i], Number: m.IID, MergeRequest: true},
				UpdatedAt: *m.UpdatedAt, Source: "authored merge request",
			})
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(list) == 0 {
			return out, nil
		}
		page = next
	}
}
