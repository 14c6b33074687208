package forgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

func (s *ForgejoServer) fjError(w http.ResponseWriter, status int, msg string) {
	fjJSON(w, status, map[string]any{"message": msg, "url": s.URL + "/api/swagger"})
}

func fjJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fjTime(t time.Time) string { return t.Format(time.RFC3339) }

func (s *ForgejoServer) fjUser(u *modelUser) map[string]any {
	return map[string]any{
		"id": u.id, "login": u.login, "login_name": "", "source_id": 0, "full_name": "", "email": u.login + "@noreply.example",
		"avatar_url": s.URL + "/avatars/" + u.login, "html_url": s.URL + "/" + u.login, "language": "",
		"is_admin": false, "last_login": fjTime(s.clock), "created": fjTime(s.clock), "restricted": false,
		"active": true, "prohibit_login": false, "location": "", "website": "", "description": "",
		"visibility": "public", "followers_count": 0, "following_count": 0, "starred_repos_count": 0,
		"username": u.login,
	}
}

func (s *ForgejoServer) fjRepo(p *modelRepo) map[string]any {
	owner, name, _ := strings.Cut(p.path, "/")
	return map[string]any{
		"id": p.id, "owner": map[string]any{"id": 0, "login": owner, "username": owner}, "name": name,
		"full_name": p.path, "description": "", "empty": false, "private": false, "fork": false,
		"html_url": s.URL + "/" + p.path, "ssh_url": "ssh://git@forgejo.example/" + p.path + ".git",
		"clone_url": p.cloneURL, "default_branch": p.defaultBranch, "has_issues": true,
		"has_pull_requests": true, "created_at": fjTime(s.clock), "updated_at": fjTime(s.clock),
		"permissions": s.fjBotPermissions(p),
	}
}

func (s *ForgejoServer) fjLabel(l *modelLabel) map[string]any {
	return map[string]any{
		"id": l.id, "name": l.name, "exclusive": strings.Contains(l.name, "/"), "is_archived": false,
		"color": strings.TrimPrefix(l.color, "#"), "description": "", "url": fmt.Sprintf("%s/api/v1/labels/%d", s.URL, l.id),
	}
}

func (s *ForgejoServer) fjIssueLabels(p *modelRepo, is *modelIssue) []any {
	out := []any{}
	for _, n := range is.labels {
		if l := s.fjLabelByName(p, n); l != nil {
			out = append(out, s.fjLabel(l))
		}
	}
	return out
}

func (s *ForgejoServer) fjAssignees(is *modelIssue) (first any, all any) {
	if len(is.assignees) == 0 {
		return nil, nil // Forgejo sends null for no assignees
	}
	list := []any{}
	for _, a := range is.assignees {
		list = append(list, s.fjUser(s.userLocked(a)))
	}
	return list[0], list
}

func fjState(is *modelIssue) string {
	if is.state == "open" {
		return "open"
	}
	return "closed"
}

func (s *ForgejoServer) fjIssueJSON(p *modelRepo, is *modelIssue) map[string]any {
	owner, name, _ := strings.Cut(p.path, "/")
	first, all := s.fjAssignees(is)
	kind := "issues"
	var pr any
	if is.mr {
		kind = "pulls"
		var mergedAt any
		if is.state == "merged" {
			mergedAt = fjTime(is.updated)
		}
		pr = map[string]any{"merged": is.state == "merged", "merged_at": mergedAt}
	}
	var closed any
	if is.state != "open" {
		closed = fjTime(is.updated)
	}
	return map[string]any{
		"id": is.id, "url": fmt.Sprintf("%s/api/v1/repos/%s/issues/%d", s.URL, p.path, is.number),
		"html_url": fmt.Sprintf("%s/%s/%s/%d", s.URL, p.path, kind, is.number), "number": is.number,
		"user": s.fjUser(is.author), "original_author": "", "original_author_id": 0,
		"title": is.title, "body": is.body, "ref": "", "assets": []any{}, "labels": s.fjIssueLabels(p, is),
		"milestone": nil, "assignee": first, "assignees": all, "state": fjState(is), "is_locked": false,
		"comments": len(is.comments), "created_at": fjTime(is.created), "updated_at": fjTime(is.updated),
		"closed_at": closed, "due_date": nil, "pull_request": pr,
		"repository": map[string]any{"id": p.id, "name": name, "owner": owner, "full_name": p.path},
	}
}

func (s *ForgejoServer) fjCommentJSON(p *modelRepo, is *modelIssue, c *modelComment) map[string]any {
	kind, prURL, issueURL := "issues", "", fmt.Sprintf("%s/%s/issues/%d", s.URL, p.path, is.number)
	if is.mr {
		kind, prURL, issueURL = "pulls", fmt.Sprintf("%s/%s/pulls/%d", s.URL, p.path, is.number), ""
	}
	return map[string]any{
		"id": c.id, "html_url": fmt.Sprintf("%s/%s/%s/%d#issuecomment-%d", s.URL, p.path, kind, is.number, c.id),
		"pull_request_url": prURL, "issue_url": issueURL, "user": s.fjUser(c.author),
		"original_author": "", "original_author_id": 0, "body": c.body, "assets": []any{},
		"created_at": fjTime(c.created), "updated_at": fjTime(c.updated),
	}
}

func (s *ForgejoServer) fjBranch(p *modelRepo, branch, sha string) map[string]any {
	return map[string]any{"label": branch, "ref": branch, "sha": sha, "repo_id": p.id, "repo": s.fjRepo(p)}
}

func (s *ForgejoServer) fjPull(p *modelRepo, mi *modelIssue) map[string]any {
	first, all := s.fjAssignees(mi)
	merged := mi.state == "merged"
	var mergedAt, mergedBy, mergeSHA, closed any
	if merged {
		mergedAt, mergedBy, mergeSHA = fjTime(mi.updated), s.fjUser(s.userLocked(BotLogin)), p.headLocked(mi.target)
	}
	if mi.state != "open" {
		closed = fjTime(mi.updated)
	}
	return map[string]any{
		"id": mi.id, "url": fmt.Sprintf("%s/%s/pulls/%d", s.URL, p.path, mi.number), "number": mi.number,
		"user": s.fjUser(mi.author), "title": mi.title, "body": mi.body, "labels": s.fjIssueLabels(p, mi),
		"milestone": nil, "assignee": first, "assignees": all, "requested_reviewers": s.fjReviewers(mi),
		"state": fjState(mi), "draft": false, "is_locked": false, "comments": len(mi.comments),
		"html_url":  fmt.Sprintf("%s/%s/pulls/%d", s.URL, p.path, mi.number),
		"diff_url":  fmt.Sprintf("%s/%s/pulls/%d.diff", s.URL, p.path, mi.number),
		"patch_url": fmt.Sprintf("%s/%s/pulls/%d.patch", s.URL, p.path, mi.number),
		"mergeable": !merged && mi.mergeStatusOr() == forge.MergeStatusMergeable, "merged": merged, "merged_at": mergedAt, "merge_commit_sha": mergeSHA,
		"merged_by": mergedBy, "allow_maintainer_edit": false,
		"base": s.fjBranch(p, mi.target, p.headLocked(mi.target)), "head": s.fjBranch(p, mi.source, mi.sha),
		"merge_base": p.headLocked(mi.target), "due_date": nil, "created_at": fjTime(mi.created),
		"updated_at": fjTime(mi.updated), "closed_at": closed, "pin_order": 0,
	}
}

// fjStatusState maps a seeded job to a Forgejo commit status state.
func fjStatusState(st forge.CIState) string {
	switch st {
	case forge.CISuccess, forge.CISkipped:
		return "success"
	case forge.CIFailed:
		return "failure"
	}
	return "pending"
}

// fjPaginate writes the page of items asked for with page/limit, with X-Total-Count and a Link
// header as Forgejo sets them.
func fjPaginate(w http.ResponseWriter, r *http.Request, capSize int, items []any) {
	fjPaginateAs(w, r, capSize, items, linkAndTotal)
}

// fjPaging is which paging headers a list sends, as Gitea and Forgejo (v1.25 routers) do.
type fjPaging int

const (
	// linkAndTotal: Link (next, last, first, prev) and X-Total-Count (pull requests, statuses,
	// the issue search).
	linkAndTotal fjPaging = iota
	// totalOnly: X-Total-Count alone, no Link (a pull request's reviews, notifications,
	// labels, hooks).
	totalOnly
	// pageTotalOnly: X-Total-Count of the page's own length, no Link (an issue's timeline).
	pageTotalOnly
)

// fjPaginateAs is fjPaginate with the headers of paging.
func fjPaginateAs(w http.ResponseWriter, r *http.Request, capSize int, items []any, paging fjPaging) {
	pw := cutPage(r.URL.Query(), "limit", 30, 50, capSize, len(items))
	if paging != linkAndTotal {
		h := w.Header()
		total := pw.total
		if paging == pageTotalOnly {
			total = pw.hi - pw.lo
		}
		h.Set("X-Total-Count", strconv.Itoa(total))
		h.Set("Access-Control-Expose-Headers", "X-Total-Count, Link")
		fjJSON(w, http.StatusOK, items[pw.lo:pw.hi])
		return
	}
	var links []string
	if pw.page < pw.pages {
		links = append(links, pageLink(r, "limit", pw.size, pw.page+1, "next"), pageLink(r, "limit", pw.size, pw.pages, "last"))
	}
	if pw.page > 1 {
		links = append(links, pageLink(r, "limit", pw.size, 1, "first"), pageLink(r, "limit", pw.size, pw.page-1, "prev"))
	}
	h := w.Header()
	h.Set("X-Total-Count", strconv.Itoa(pw.total))
	h.Set("Access-Control-Expose-Headers", "X-Total-Count, Link")
	if len(links) > 0 {
		h.Set("Link", strings.Join(links, ","))
	}
	fjJSON(w, http.StatusOK, items[pw.lo:pw.hi])
}

// fjSince reads the since query parameter (RFC 3339); a bad value answers 422 as Forgejo does
// and reports false.
func fjSince(w http.ResponseWriter, r *http.Request, s *ForgejoServer) (time.Time, bool) {
	v := r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, "parsing time "+strconv.Quote(v))
		return time.Time{}, false
	}
	return t, true
}

// fjSearchIssues answers GET /repos/issues/search for what Alfred asks: assigned=true (issues
// assigned to the token's account, the bot), state=open, type=issues and since, newest
// updated first, paginated like every list; each issue carries its "repository" as Forgejo
// sends it. Other filters are refused with 422 so a client asking for more is noticed.
func (s *ForgejoServer) fjSearchIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("assigned") != "true" || seedOr(q.Get("state"), "open") != "open" || q.Get("type") != "issues" {
		s.fjError(w, http.StatusUnprocessableEntity, "forgetest: only assigned=true&state=open&type=issues is modelled")
		return
	}
	since, ok := fjSince(w, r, s)
	if !ok {
		return
	}
	out := []any{}
	for _, a := range s.assignedLocked(BotLogin, since) {
		out = append(out, s.fjIssueJSON(a.repo, a.is))
	}
	fjPaginate(w, r, s.pageSize, out)
}

// fjTimeline answers GET …/issues/{index}/timeline with the issue's comments and its label,
// assignee and state history created at or after since, oldest first, paginated, in Forgejo's
// shapes: "label" entries carry one label object and body "1" for an addition, "" for a
// removal; "assignees" entries an assignee and removed_assignee; "close"/"reopen" only a user.
func (s *ForgejoServer) fjTimeline(w http.ResponseWriter, r *http.Request, p *modelRepo, is *modelIssue) {
	since, ok := fjSince(w, r, s)
	if !ok {
		return
	}
	type entry struct {
		at time.Time
		v  map[string]any
	}
	var entries []entry
	for _, c := range commentsSinceLocked(is, since) {
		if !c.created.Before(since) {
			j := s.fjCommentJSON(p, is, c)
			j["type"] = "comment"
			entries = append(entries, entry{c.created, j})
		}
	}
	for _, a := range activitySinceLocked(is, since) {
		u := s.userLocked(a.Actor.Login)
		j := map[string]any{"id": s.nextID(), "user": s.fjUser(u), "created_at": fjTime(a.At), "updated_at": fjTime(a.At), "body": ""}
		switch a.Kind {
		case forge.ActivityLabelAdded, forge.ActivityLabelRemoved:
			j["type"] = "label"
			if l := s.fjLabelByName(p, a.Label); l != nil {
				j["label"] = s.fjLabel(l)
			}
			if a.Kind == forge.ActivityLabelAdded {
				j["body"] = "1"
			}
		case forge.ActivityAssigned, forge.ActivityUnassigned:
			j["type"], j["assignee"] = "assignees", s.fjUser(s.userLocked(a.Login))
			j["removed_assignee"] = a.Kind == forge.ActivityUnassigned
		case forge.ActivityClosed:
			j["type"] = "close"
		case forge.ActivityReopened:
			j["type"] = "reopen"
		}
		entries = append(entries, entry{a.At, j})
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.at.Compare(b.at) })
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.v)
	}
	fjPaginateAs(w, r, s.pageSize, out, pageTotalOnly)
}
