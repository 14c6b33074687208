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

// glMessage answers GitLab's error shape {"message": msg}.
func glMessage(w http.ResponseWriter, status int, msg any) {
	glJSON(w, status, map[string]any{"message": msg})
}

func glJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *GitLabServer) glUser(u *modelUser) map[string]any {
	return map[string]any{
		"id": u.id, "username": u.login, "name": u.login, "state": "active", "bot": u.bot,
		"avatar_url": s.URL + "/uploads/-/system/user/avatar/" + strconv.FormatInt(u.id, 10) + "/avatar.png",
		"web_url":    s.URL + "/" + u.login,
	}
}

func (s *GitLabServer) glProjectJSON(p *modelRepo) map[string]any {
	ns, name, _ := cutLast(p.path)
	return map[string]any{
		"id": p.id, "name": name, "path": name, "path_with_namespace": p.path,
		"name_with_namespace": strings.ReplaceAll(p.path, "/", " / "),
		"default_branch":      p.defaultBranch, "http_url_to_repo": p.cloneURL,
		"ssh_url_to_repo": "git@" + strings.TrimPrefix(strings.TrimPrefix(s.URL, "http://"), "https://") + ":" + p.path + ".git",
		"web_url":         s.URL + "/" + p.path, "visibility": "private",
		"namespace":   map[string]any{"id": p.id + 100000, "name": ns, "path": ns, "kind": "group", "full_path": ns},
		"permissions": s.glBotPermissions(p),
	}
}

func cutLast(path string) (ns, name string, ok bool) {
	i := strings.LastIndex(path, "/")
	if i < 0 {
		return "", path, false
	}
	return path[:i], path[i+1:], true
}

func glLabel(l *modelLabel, projectLabel bool) map[string]any {
	return map[string]any{
		"id": l.id, "name": l.name, "color": l.color, "text_color": "#FFFFFF", "description": nil,
		"description_html": "", "open_issues_count": 0, "closed_issues_count": 0,
		"open_merge_requests_count": 0, "subscribed": false, "priority": nil, "is_project_label": projectLabel,
	}
}

// glBody decodes a JSON (client-go) or form body into a map of raw values.
func glBody(r *http.Request) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(r.Body).Decode(&out); err != nil {
			return nil, err
		}
		return out, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	for k, v := range r.PostForm {
		b, _ := json.Marshal(strings.Join(v, ","))
		out[strings.TrimSuffix(k, "[]")] = b
	}
	return out, nil
}

func glString(raw map[string]json.RawMessage, key string) (string, bool) {
	v, ok := raw[key]
	if !ok || string(v) == "null" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return strings.Trim(string(v), `"`), true
	}
	return s, true
}

// glList reads a label list sent as "a,b" or ["a","b"].
func glList(raw map[string]json.RawMessage, key string) ([]string, bool) {
	v, ok := raw[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	var arr []string
	if err := json.Unmarshal(v, &arr); err != nil {
		s, _ := glString(raw, key)
		arr = strings.Split(s, ",")
	}
	var out []string
	for _, a := range arr {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out, true
}

func glIDs(raw map[string]json.RawMessage, key string) ([]int64, bool) {
	v, ok := raw[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	var arr []int64
	if err := json.Unmarshal(v, &arr); err != nil {
		var one int64
		if err := json.Unmarshal(v, &one); err == nil {
			return []int64{one}, true
		}
		s, _ := glString(raw, key)
		for _, p := range strings.Split(s, ",") {
			if n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64); err == nil {
				arr = append(arr, n)
			}
		}
	}
	return arr, true
}

func glState(is *modelIssue) string {
	if is.state == "open" {
		return "opened"
	}
	return is.state
}

func (s *GitLabServer) glIssueJSON(p *modelRepo, is *modelIssue) map[string]any {
	assignees := []any{}
	var first any
	for _, a := range is.assignees {
		u := s.glUser(s.userLocked(a))
		assignees = append(assignees, u)
		if first == nil {
			first = u
		}
	}
	kind := "issues"
	if is.mr {
		kind = "merge_requests"
	}
	m := map[string]any{
		"id": is.id, "iid": is.number, "project_id": p.id, "title": is.title, "description": is.body,
		"state": glState(is), "author": s.glUser(is.author), "assignees": assignees, "assignee": first,
		"labels": seedNonNil(slices.Clone(is.labels)), "web_url": fmt.Sprintf("%s/%s/-/%s/%d", s.URL, p.path, kind, is.number),
		"created_at": is.created.Format(time.RFC3339Nano), "updated_at": is.updated.Format(time.RFC3339Nano),
		"user_notes_count": len(is.comments), "references": map[string]any{
			"short": glRefChar(is) + strconv.FormatInt(is.number, 10), "relative": glRefChar(is) + strconv.FormatInt(is.number, 10),
			"full": p.path + glRefChar(is) + strconv.FormatInt(is.number, 10),
		},
	}
	if is.mr {
		m["source_branch"], m["target_branch"], m["sha"] = is.source, is.target, is.sha
		m["source_project_id"], m["target_project_id"] = p.id, p.id
		m["draft"], m["merge_commit_sha"] = false, nil
		m["head_pipeline"] = nil
		if run := p.headPipelineLocked(is); run != nil {
			m["head_pipeline"] = s.glPipelineJSON(p, run)
		}
		s.glMergeFields(m, p, is)
		if is.state == "merged" {
			m["merged_at"] = is.updated.Format(time.RFC3339Nano)
			m["merge_user"] = s.glUser(s.userLocked(BotLogin))
		} else {
			m["merged_at"] = nil
		}
	} else {
		m["type"], m["issue_type"], m["confidential"] = "ISSUE", "issue", false
	}
	return m
}

func glRefChar(is *modelIssue) string {
	if is.mr {
		return "!"
	}
	return "#"
}

func (s *GitLabServer) glNoteJSON(p *modelRepo, is *modelIssue, c *modelComment) map[string]any {
	typ := "Issue"
	if is.mr {
		typ = "MergeRequest"
	}
	return map[string]any{
		"id": c.id, "type": nil, "body": c.body, "attachment": nil, "author": s.glUser(c.author),
		"created_at": c.created.Format(time.RFC3339Nano), "updated_at": c.updated.Format(time.RFC3339Nano),
		"system": c.system, "noteable_id": is.id, "noteable_type": typ, "noteable_iid": is.number,
		"project_id": p.id, "resolvable": false, "confidential": false, "internal": false,
	}
}

// glPaginate writes the page of items asked for with page/per_page and GitLab's offset
// pagination headers.
func glPaginate(w http.ResponseWriter, r *http.Request, capSize int, items []any) {
	pw := cutPage(r.URL.Query(), "per_page", 20, 100, capSize, len(items))
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(pw.page))
	h.Set("X-Per-Page", strconv.Itoa(pw.size))
	h.Set("X-Total", strconv.Itoa(pw.total))
	h.Set("X-Total-Pages", strconv.Itoa(pw.pages))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	var links []string
	if pw.page > 1 {
		h.Set("X-Prev-Page", strconv.Itoa(pw.page-1))
		links = append(links, pageLink(r, "per_page", pw.size, pw.page-1, "prev"))
	}
	if pw.page < pw.pages {
		h.Set("X-Next-Page", strconv.Itoa(pw.page+1))
		links = append(links, pageLink(r, "per_page", pw.size, pw.page+1, "next"))
	}
	links = append(links, pageLink(r, "per_page", pw.size, 1, "first"), pageLink(r, "per_page", pw.size, pw.pages, "last"))
	h.Set("Link", strings.Join(links, ", "))
	glJSON(w, http.StatusOK, items[pw.lo:pw.hi])
}

// glAssignedIssues answers GET /issues for what Alfred asks: assignee_username, state=opened,
// scope=all and updated_after (ISO 8601), ordered updated_at desc, paginated like every list.
// Other filters are refused with 400 so a client asking for more is noticed.
func (s *GitLabServer) glAssignedIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	login := q.Get("assignee_username")
	if login == "" || q.Get("state") != "opened" || q.Get("scope") != "all" {
		glJSON(w, http.StatusBadRequest, map[string]any{"error": "forgetest: only assignee_username&state=opened&scope=all is modelled"})
		return
	}
	var since time.Time
	if v := q.Get("updated_after"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			glJSON(w, http.StatusBadRequest, map[string]any{"error": "updated_after is invalid"})
			return
		}
		since = t
	}
	out := []any{}
	for _, a := range s.assignedLocked(login, since) {
		out = append(out, s.glIssueJSON(a.repo, a.is))
	}
	glPaginate(w, r, s.pageSize, out)
}

// glResourceEvents answers …/resource_label_events (action "add"/"remove" with the label) and
// …/resource_state_events (state "closed"/"reopened") from the issue's history, oldest first,
// paginated, in GitLab's shapes. Assignments are not resource events on GitLab: they are the
// system notes SetIssueAssignees writes.
func (s *GitLabServer) glResourceEvents(w http.ResponseWriter, r *http.Request, p *modelRepo, is *modelIssue, kind string) {
	out := []any{}
	typ := "Issue"
	if is.mr {
		typ = "MergeRequest"
	}
	for _, a := range is.activity {
		e := map[string]any{
			"id": s.nextID(), "user": s.glUser(s.userLocked(a.Actor.Login)), "created_at": a.At.Format(time.RFC3339Nano),
			"resource_type": typ, "resource_id": is.id,
		}
		switch {
		case kind == "resource_label_events" && (a.Kind == forge.ActivityLabelAdded || a.Kind == forge.ActivityLabelRemoved):
			e["action"] = "add"
			if a.Kind == forge.ActivityLabelRemoved {
				e["action"] = "remove"
			}
			lbl := map[string]any{"id": 0, "name": a.Label, "color": DefaultLabelColor, "description": nil}
			if l := s.glAvailableLabel(p, a.Label); l != nil {
				lbl["id"], lbl["color"] = l.id, l.color
			}
			e["label"] = lbl
		case kind == "resource_state_events" && a.Kind == forge.ActivityClosed:
			e["state"] = "closed"
		case kind == "resource_state_events" && a.Kind == forge.ActivityReopened:
			e["state"] = "reopened"
		default:
			continue
		}
		out = append(out, e)
	}
	glPaginate(w, r, s.pageSize, out)
}
