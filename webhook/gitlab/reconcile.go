package gitlab

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// AssignedIssues lists the open issues assigned to the token's account in every project it
// can see (GET /issues?assignee_username=…&state=opened&scope=all&updated_after=…,
// order_by=updated_at, sort=desc), at most limit (<= 0: all), following pages. The project
// path comes from references.full ("group/sub/name#12").
func (c *Client) AssignedIssues(ctx context.Context, since time.Time, limit int) ([]forge.Issue, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return nil, err
	}
	opt := &gl.ListIssuesOptions{
		ListOptions:      gl.ListOptions{PerPage: 100},
		AssigneeUsername: gl.Ptr(bot.Login), State: gl.Ptr("opened"), Scope: gl.Ptr("all"),
		OrderBy: gl.Ptr("updated_at"), Sort: gl.Ptr("desc"),
	}
	if !since.IsZero() {
		opt.UpdatedAfter = gl.Ptr(since)
	}
	var (
		out  []forge.Issue
		page gl.RequestOptionFunc
	)
	for {
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		list, resp, err := c.api.Issues.ListIssues(opt, reqOpts...)
		if err != nil {
			return nil, c.wrap("list issues assigned to the bot", resp, err)
		}
		for _, gi := range list {
			repo := clientIssueRepo(gi)
			if repo == "" {
				continue
			}
			out = append(out, *clientIssue(forge.IssueRef{Repo: repo, Number: gi.IID}, gi))
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(list) == 0 {
			return out, nil
		}
		page = next
	}
}

// clientIssueRepo is the project path of an issue from a cross-project list: references.full
// without its "#iid" ("" when GitLab sent no references).
func clientIssueRepo(gi *gl.Issue) string {
	if gi.References != nil {
		if i := strings.LastIndex(gi.References.Full, "#"); i > 0 {
			return gi.References.Full[:i]
		}
	}
	return ""
}

// Activity merges, oldest first, the issue's resource label events (GET …/resource_label_events),
// its resource state events (GET …/resource_state_events) and the system notes that record
// assignments ("assigned to @a and @b", "unassigned @c", both in one note on a reassignment:
// GitLab has no structured assignee history). The first two have no time filter and are read
// whole; the notes are read newest-edited first until older than since.
func (c *Client) Activity(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Activity, error) {
	var out []forge.Activity
	keep := func(at *time.Time) bool { return at != nil && !at.Before(since) }
	labels, resp, err := clientAllPages(func(page gl.RequestOptionFunc) ([]*gl.LabelEvent, *gl.Response, error) {
		return c.api.ResourceLabelEvents.ListIssueLabelEvents(ref.Repo, ref.Number,
			&gl.ListLabelEventsOptions{ListOptions: gl.ListOptions{PerPage: 100}}, clientReqOpts(ctx, page)...)
	})
	if err != nil {
		return nil, c.wrap("list label events of "+ref.String(), resp, err)
	}
	for _, e := range labels {
		if !keep(e.CreatedAt) {
			continue
		}
		a := forge.Activity{Kind: forge.ActivityLabelAdded, Label: e.Label.Name, At: *e.CreatedAt,
			Actor: forge.User{ID: e.User.ID, Login: e.User.Username}}
		if e.Action == "remove" {
			a.Kind = forge.ActivityLabelRemoved
		}
		out = append(out, a)
	}
	states, resp, err := clientAllPages(func(page gl.RequestOptionFunc) ([]*gl.StateEvent, *gl.Response, error) {
		return c.api.ResourceStateEvents.ListIssueStateEvents(ref.Repo, ref.Number,
			&gl.ListStateEventsOptions{ListOptions: gl.ListOptions{PerPage: 100}}, clientReqOpts(ctx, page)...)
	})
	if err != nil {
		return nil, c.wrap("list state events of "+ref.String(), resp, err)
	}
	for _, e := range states {
		if !keep(e.CreatedAt) || (e.State != "closed" && e.State != "reopened") {
			continue
		}
		a := forge.Activity{Kind: forge.ActivityClosed, At: *e.CreatedAt}
		if e.State == "reopened" {
			a.Kind = forge.ActivityReopened
		}
		if e.User != nil {
			a.Actor = forge.User{ID: e.User.ID, Login: e.User.Username}
		}
		out = append(out, a)
	}
	assigned, err := c.assignmentNotes(ctx, ref, since)
	if err != nil {
		return nil, err
	}
	out = append(out, assigned...)
	slices.SortStableFunc(out, func(a, b forge.Activity) int { return a.At.Compare(b.At) })
	return out, nil
}

var (
	// GitLab joins the names as Rails' to_sentence does: "@a", "@a and @b", "@a, @b, and @c".
	clientAssignedNote   = regexp.MustCompile(`(?:^|\band )assigned to ((?:@[\w.\-]+(?:, and |, | and )?)+)`)
	clientUnassignedNote = regexp.MustCompile(`(?:^|\band )unassigned ((?:@[\w.\-]+(?:, and |, | and )?)+)`)
	clientLogin          = regexp.MustCompile(`@([\w.\-]+)`)
)

// assignmentNotes reads the system notes edited at or after since and turns the assignment
// ones into activity.
func (c *Client) assignmentNotes(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Activity, error) {
	var (
		out  []forge.Activity
		page gl.RequestOptionFunc
	)
	for {
		notes, resp, err := c.notesPage(ctx, ref, "updated_at", "desc", page)
		if err != nil {
			return nil, c.wrap("list notes of "+ref.String(), resp, err)
		}
		for _, n := range notes {
			if n.UpdatedAt != nil && n.UpdatedAt.Before(since) {
				return out, nil
			}
			if !n.System || n.CreatedAt == nil {
				continue
			}
			actor := forge.User{ID: n.Author.ID, Login: n.Author.Username}
			for _, k := range []struct {
				kind forge.ActivityKind
				re   *regexp.Regexp
			}{{forge.ActivityAssigned, clientAssignedNote}, {forge.ActivityUnassigned, clientUnassignedNote}} {
				for _, m := range k.re.FindAllStringSubmatch(n.Body, -1) {
					for _, l := range clientLogin.FindAllStringSubmatch(m[1], -1) {
						out = append(out, forge.Activity{Kind: k.kind, Login: l[1], Actor: actor, At: *n.CreatedAt})
					}
				}
			}
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(notes) == 0 {
			return out, nil
		}
		page = next
	}
}

func clientReqOpts(ctx context.Context, page gl.RequestOptionFunc) []gl.RequestOptionFunc {
	opts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
	if page != nil {
		opts = append(opts, page)
	}
	return opts
}

// clientAllPages calls list for every page, following Link rel="next".
// On an error it returns the failing page's response for the status.
func clientAllPages[T any](list func(page gl.RequestOptionFunc) ([]T, *gl.Response, error)) ([]T, *gl.Response, error) {
	var (
		out  []T
		page gl.RequestOptionFunc
	)
	for {
		items, resp, err := list(page)
		if err != nil {
			return nil, resp, err
		}
		out = append(out, items...)
		next, ok := gl.WithNext(resp)
		if !ok || len(items) == 0 {
			return out, resp, nil
		}
		page = next
	}
}
