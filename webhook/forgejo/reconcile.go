package forgejo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// AssignedIssues lists the open issues assigned to the token's account on the whole instance
// (GET /repos/issues/search?assigned=true&state=open&type=issues&since=…), in the forge's
// order, at most limit (<= 0: all), following Link rel="next" (the server may cap a page
// below the limit asked for). The SDK's ListIssues cannot send assigned=true, so the request
// is built here, on the same retrying transport.
func (c *Client) AssignedIssues(ctx context.Context, since time.Time, limit int) ([]forge.Issue, error) {
	var out []forge.Issue
	seen := 0
	for page := 1; ; page++ {
		q := url.Values{"assigned": {"true"}, "state": {"open"}, "type": {"issues"}}
		clientPage(q, page, since)
		var list []*gitea.Issue
		h, err := c.getJSON(ctx, "search issues assigned to the bot", "/repos/issues/search", q, &list)
		if err != nil {
			return nil, err
		}
		for _, gi := range list {
			if gi.PullRequest != nil || gi.Repository == nil {
				continue
			}
			out = append(out, *clientIssue(forge.IssueRef{Repo: gi.Repository.FullName, Number: gi.Index}, gi))
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
		seen += len(list)
		if !morePages(h, page, len(list), seen) {
			return out, nil
		}
	}
}

// timelineEvent is the part of one entry of GET …/issues/{index}/timeline that Activity reads.
// The SDK's TimelineComment declares "label" as a list, while Forgejo and Gitea send one
// object, and has no assignee fields, hence this shape.
type timelineEvent struct {
	Type            string       `json:"type"`
	Body            string       `json:"body"`
	User            *gitea.User  `json:"user"`
	Label           *gitea.Label `json:"label"`
	Assignee        *gitea.User  `json:"assignee"`
	RemovedAssignee bool         `json:"removed_assignee"`
	Created         time.Time    `json:"created_at"`
}

// Activity reads the issue's timeline (GET …/issues/{index}/timeline?since=, oldest first,
// every page: until one comes back empty, since the servers send no Link there) and keeps its label, assignee, close and reopen entries. A label entry with
// body "1" is an addition, any other body a removal, as Forgejo and Gitea write them.
func (c *Client) Activity(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Activity, error) {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("/repos/%s/%s/issues/%d/timeline", url.PathEscape(owner), url.PathEscape(name), ref.Number)
	var out []forge.Activity
	for page := 1; ; page++ {
		q := url.Values{}
		clientPage(q, page, since)
		var list []timelineEvent
		h, err := c.getJSON(ctx, "read the timeline of "+ref.String(), path, q, &list)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			if a, ok := clientActivity(e); ok {
				out = append(out, a)
			}
		}
		// Gitea and Forgejo send no Link here and an X-Total-Count of the page's own length,
		// and a server may cap a page below the limit asked for: the next page is asked until
		// one comes back empty.
		if len(list) == 0 || page >= maxListPages ||
			(h.Get("Link") != "" && !strings.Contains(h.Get("Link"), `rel="next"`)) {
			return out, nil
		}
	}
}

func clientActivity(e timelineEvent) (forge.Activity, bool) {
	a := forge.Activity{At: e.Created}
	if e.User != nil {
		a.Actor = forge.User{ID: e.User.ID, Login: e.User.UserName}
	}
	switch {
	case e.Type == "label" && e.Label != nil:
		a.Kind, a.Label = forge.ActivityLabelRemoved, e.Label.Name
		if e.Body == "1" {
			a.Kind = forge.ActivityLabelAdded
		}
	case e.Type == "assignees" && e.Assignee != nil:
		a.Kind, a.Login = forge.ActivityAssigned, e.Assignee.UserName
		if e.RemovedAssignee {
			a.Kind = forge.ActivityUnassigned
		}
	case e.Type == "close":
		a.Kind = forge.ActivityClosed
	case e.Type == "reopen":
		a.Kind = forge.ActivityReopened
	default:
		return a, false
	}
	return a, true
}

// clientPage sets the page, limit and (when not zero) since parameters of a list request.
func clientPage(q url.Values, page int, since time.Time) {
	q.Set("page", strconv.Itoa(page))
	q.Set("limit", strconv.Itoa(clientPageSize))
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
}

// getJSON makes one GET of an /api/v1 path the SDK cannot express, decodes the answer into out
// and returns the answer's header (for morePages). Errors are wrapped as the SDK calls' are.
func (c *Client) getJSON(ctx context.Context, op, path string, q url.Values, out any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/api/v1"+path+"?"+q.Encode(), nil)
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
	gr := &gitea.Response{Response: resp}
	if resp.StatusCode != http.StatusOK {
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&msg)
		return nil, c.wrap(op, gr, fmt.Errorf("%s", msg.Message))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, c.wrap(op, gr, fmt.Errorf("decode: %w", err))
	}
	return resp.Header, nil
}
