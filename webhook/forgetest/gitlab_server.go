package forgetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// GitLabServer is an httptest stand-in for the GitLab REST API v4 endpoints that
// webhook/gitlab.Client uses, over in-memory state seeded and read with the Seeder methods:
//
//	GET  /user, /users?username=
//	GET  /projects/:id, /projects/:id/members/all/:user_id, /projects/:id/hooks (seeded with AddHook)
//	GET|POST /projects/:id/labels
//	GET|PUT  /projects/:id/issues/:iid, /projects/:id/merge_requests/:iid
//	GET|POST /projects/:id/(issues|merge_requests)/:iid/notes, PUT …/notes/:note_id
//	GET|POST /projects/:id/merge_requests
//	GET  /projects/:id/pipelines, /projects/:id/pipelines/:id/jobs, /projects/:id/jobs/:id/trace
//
// :id is the numeric project id or the URL-escaped path. Answers follow GitLab's JSON shapes
// and status codes (docs.gitlab.com/api): 401 without the right PRIVATE-TOKEN (or
// "Authorization: Bearer"), 404 {"message":"404 … Not Found"}, 400 for a missing required
// field, 409 for an existing label or a second open merge request of a branch, 422 for a
// merge request from a branch into itself. Labels added with AddOrgLabel are group labels of
// the group with that full path: GET …/labels lists those of the project's ancestor groups
// after the project's own (is_project_label false) unless include_ancestor_groups=false,
// POST …/labels answers 409 "Label already exists" for a name the project or an ancestor group
// has, and labels/add_labels use a group label rather than creating a project label. Lists
// are paginated with page/per_page (default 20, at most 100) and answer X-Page, X-Per-Page,
// X-Total, X-Total-Pages, X-Next-Page, X-Prev-Page and a Link header (rel
// first/prev/next/last), as GitLab does for offset pagination; client-go follows Link
// rel="next", else X-Next-Page. Issues and merge requests have separate iid spaces. The server
// closes when the test ends.
type GitLabServer struct {
	*model
	// URL is the instance URL to configure as the client's BaseURL (the API is under
	// URL+"/api/v4").
	URL string
	// Token is the only access token the server accepts.
	Token string
	srv   *httptest.Server
}

var _ Seeder = (*GitLabServer)(nil)

// NewGitLabServer starts a GitLabServer with a random Token and only the bot account
// (BotLogin), and stops it in t.Cleanup.
func NewGitLabServer(t testing.TB) *GitLabServer {
	s := &GitLabServer{model: newModel(false), Token: "glpat-" + randomHex(10)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// glMessage answers GitLab's error shape {"message": msg}.
func glMessage(w http.ResponseWriter, status int, msg any) {
	glJSON(w, status, map[string]any{"message": msg})
}

func glJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *GitLabServer) serve(w http.ResponseWriter, r *http.Request) {
	s.logRequest(r.Method + " " + r.URL.RequestURI())
	if st := s.takeFailure(); st != 0 {
		glMessage(w, st, http.StatusText(st))
		return
	}
	if after, ok := s.takeRateLimit(); ok {
		// GitLab's rate-limit answer: 429 "Retry later" with Retry-After and RateLimit-* headers.
		w.Header().Set("Retry-After", strconv.Itoa(after))
		w.Header().Set("RateLimit-Reset", strconv.FormatInt(time.Now().Unix()+int64(after), 10))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("Retry later\n"))
		return
	}
	tok := r.Header.Get("Private-Token")
	if tok == "" {
		tok = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if tok != s.Token {
		glMessage(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/")
	if !ok {
		glMessage(w, http.StatusNotFound, "404 Not Found")
		return
	}
	var seg []string
	for _, p := range strings.Split(strings.Trim(rest, "/"), "/") {
		u, err := url.PathUnescape(p)
		if err != nil {
			glMessage(w, http.StatusBadRequest, "400 Bad request")
			return
		}
		seg = append(seg, u)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.route(w, r, seg)
}

func (s *GitLabServer) route(w http.ResponseWriter, r *http.Request, seg []string) {
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case len(seg) == 1 && seg[0] == "user" && get:
		glJSON(w, http.StatusOK, s.glUser(s.userLocked(BotLogin)))
		return
	case len(seg) == 1 && seg[0] == "users" && get:
		out := []any{}
		if u := s.userLocked(r.URL.Query().Get("username")); u != nil {
			out = append(out, s.glUser(u))
		}
		glPaginate(w, r, s.pageSize, out)
		return
	case len(seg) < 2 || seg[0] != "projects":
		glMessage(w, http.StatusNotFound, "404 Not Found")
		return
	}
	p := s.glProject(seg[1])
	if p == nil {
		glMessage(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	seg = seg[2:]
	switch {
	case len(seg) == 0 && get:
		glJSON(w, http.StatusOK, s.glProjectJSON(p))
	case len(seg) == 3 && seg[0] == "members" && seg[1] == "all" && get:
		s.glMember(w, p, seg[2])
	case len(seg) == 1 && seg[0] == "hooks" && get:
		s.glHooks(w, r, p)
	case len(seg) == 1 && seg[0] == "labels" && get:
		out := []any{}
		for _, l := range p.labels {
			out = append(out, glLabel(l, true))
		}
		if r.URL.Query().Get("include_ancestor_groups") != "false" { // GitLab's default is true
			for _, l := range s.glGroupLabels(p) {
				out = append(out, glLabel(l, false))
			}
		}
		glPaginate(w, r, s.pageSize, out)
	case len(seg) == 1 && seg[0] == "labels" && post:
		s.glCreateLabel(w, r, p)
	case len(seg) == 1 && seg[0] == "merge_requests" && get:
		s.glListMRs(w, r, p)
	case len(seg) == 1 && seg[0] == "merge_requests" && post:
		s.glCreateMR(w, r, p)
	case len(seg) >= 2 && (seg[0] == "issues" || seg[0] == "merge_requests"):
		s.glIssuable(w, r, p, seg)
	case len(seg) == 1 && seg[0] == "pipelines" && get:
		s.glPipelines(w, r, p)
	case len(seg) == 3 && seg[0] == "pipelines" && seg[2] == "jobs" && get:
		s.glJobs(w, r, p, seg[1])
	case len(seg) == 3 && seg[0] == "jobs" && seg[2] == "trace" && get:
		s.glTrace(w, p, seg[1])
	default:
		glMessage(w, http.StatusNotFound, "404 Not Found")
	}
}

func (s *GitLabServer) glProject(id string) *modelRepo {
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		for _, r := range s.repos {
			if r.id == n {
				return r
			}
		}
		return nil
	}
	return s.repoLocked(id)
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
		"namespace": map[string]any{"id": p.id + 100000, "name": ns, "path": ns, "kind": "group", "full_path": ns},
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

func (s *GitLabServer) glMember(w http.ResponseWriter, p *modelRepo, uid string) {
	id, _ := strconv.ParseInt(uid, 10, 64)
	for _, u := range s.users {
		if u.id != id {
			continue
		}
		level := p.access[strings.ToLower(u.login)]
		if owner, _, _ := strings.Cut(p.path, "/"); strings.EqualFold(owner, u.login) {
			level = 50
		}
		if level == 0 {
			break
		}
		m := s.glUser(u)
		m["access_level"] = level
		m["created_at"] = s.clock.Format(time.RFC3339)
		m["expires_at"] = nil
		glJSON(w, http.StatusOK, m)
		return
	}
	glMessage(w, http.StatusNotFound, "404 Not found")
}

func glLabel(l *modelLabel, projectLabel bool) map[string]any {
	return map[string]any{
		"id": l.id, "name": l.name, "color": l.color, "text_color": "#FFFFFF", "description": nil,
		"description_html": "", "open_issues_count": 0, "closed_issues_count": 0,
		"open_merge_requests_count": 0, "subscribed": false, "priority": nil, "is_project_label": projectLabel,
	}
}

// glGroupLabels returns the labels of p's ancestor groups (AddOrgLabel), nearest group first.
func (s *GitLabServer) glGroupLabels(p *modelRepo) []*modelLabel {
	var out []*modelLabel
	for ns, _, ok := cutLast(p.path); ok; ns, _, ok = cutLast(ns) {
		out = append(out, s.orgLabels[strings.ToLower(ns)]...)
	}
	return out
}

// glAvailableLabel returns the label name of p or of one of its ancestor groups, or nil.
func (s *GitLabServer) glAvailableLabel(p *modelRepo, name string) *modelLabel {
	if l := s.labelLocked(p, name); l != nil {
		return l
	}
	for _, l := range s.glGroupLabels(p) {
		if l.name == name {
			return l
		}
	}
	return nil
}

// glEnsureLabel makes name available to p, creating a project label with DefaultLabelColor
// when neither p nor an ancestor group has it, as GitLab does for labels it is asked to add.
func (s *GitLabServer) glEnsureLabel(p *modelRepo, name string) {
	if s.glAvailableLabel(p, name) == nil {
		s.ensureLabelLocked(p, name, DefaultLabelColor)
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

func (s *GitLabServer) glCreateLabel(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	raw, err := glBody(r)
	if err != nil {
		glMessage(w, http.StatusBadRequest, "400 Bad request")
		return
	}
	name, _ := glString(raw, "name")
	color, _ := glString(raw, "color")
	switch {
	case name == "":
		glJSON(w, http.StatusBadRequest, map[string]any{"error": "name is missing"})
		return
	case color == "":
		glJSON(w, http.StatusBadRequest, map[string]any{"error": "color is missing"})
		return
	case s.glAvailableLabel(p, name) != nil:
		glMessage(w, http.StatusConflict, "Label already exists")
		return
	}
	l := &modelLabel{id: s.nextID(), name: name, color: color}
	p.labels = append(p.labels, l)
	glJSON(w, http.StatusCreated, glLabel(l, true))
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
		"user_notes_count": len(is.comments), "references": map[string]any{"short": glRefChar(is) + strconv.FormatInt(is.number, 10)},
	}
	if is.mr {
		m["source_branch"], m["target_branch"], m["sha"] = is.source, is.target, is.sha
		m["source_project_id"], m["target_project_id"] = p.id, p.id
		m["draft"], m["merge_commit_sha"] = false, nil
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

// glIssuable handles /issues/:iid… and /merge_requests/:iid… (seg starts at "issues").
func (s *GitLabServer) glIssuable(w http.ResponseWriter, r *http.Request, p *modelRepo, seg []string) {
	mr := seg[0] == "merge_requests"
	iid, err := strconv.ParseInt(seg[1], 10, 64)
	var is *modelIssue
	if err == nil {
		if mr {
			is = p.mrs[iid]
		} else {
			is = p.issues[iid]
		}
	}
	if is == nil {
		glMessage(w, http.StatusNotFound, "404 Not found")
		return
	}
	seg = seg[2:]
	switch {
	case len(seg) == 0 && r.Method == http.MethodGet:
		glJSON(w, http.StatusOK, s.glIssueJSON(p, is))
	case len(seg) == 0 && r.Method == http.MethodPut:
		s.glUpdate(w, r, p, is)
	case len(seg) == 1 && seg[0] == "notes" && r.Method == http.MethodGet:
		notes := slices.Clone(is.comments)
		q := r.URL.Query()
		if q.Get("order_by") == "updated_at" {
			slices.SortStableFunc(notes, func(a, b *modelComment) int { return a.updated.Compare(b.updated) })
		}
		if q.Get("sort") != "asc" { // GitLab's default is created_at desc
			slices.Reverse(notes)
		}
		out := make([]any, 0, len(notes))
		for _, c := range notes {
			out = append(out, s.glNoteJSON(p, is, c))
		}
		glPaginate(w, r, s.pageSize, out)
	case len(seg) == 1 && seg[0] == "notes" && r.Method == http.MethodPost:
		raw, err := glBody(r)
		if err != nil {
			glMessage(w, http.StatusBadRequest, "400 Bad request")
			return
		}
		body, _ := glString(raw, "body")
		if strings.TrimSpace(body) == "" {
			glJSON(w, http.StatusBadRequest, map[string]any{"error": "body is missing"})
			return
		}
		s.addCommentLocked(is, s.userLocked(BotLogin), body, false)
		glJSON(w, http.StatusCreated, s.glNoteJSON(p, is, is.comments[len(is.comments)-1]))
	case len(seg) == 2 && seg[0] == "notes" && (r.Method == http.MethodPut || r.Method == http.MethodGet):
		nid, _ := strconv.ParseInt(seg[1], 10, 64)
		var c *modelComment
		for _, n := range is.comments {
			if n.id == nid {
				c = n
			}
		}
		if c == nil {
			glMessage(w, http.StatusNotFound, "404 Note Not Found")
			return
		}
		if r.Method == http.MethodPut {
			raw, err := glBody(r)
			if err != nil {
				glMessage(w, http.StatusBadRequest, "400 Bad request")
				return
			}
			body, ok := glString(raw, "body")
			if !ok || strings.TrimSpace(body) == "" {
				glJSON(w, http.StatusBadRequest, map[string]any{"error": "body is missing"})
				return
			}
			if c.system {
				glMessage(w, http.StatusForbidden, "403 Forbidden")
				return
			}
			c.body, c.updated = body, s.now()
		}
		glJSON(w, http.StatusOK, s.glNoteJSON(p, is, c))
	default:
		glMessage(w, http.StatusNotFound, "404 Not Found")
	}
}

// glUpdate applies PUT /issues/:iid or /merge_requests/:iid: description, title, labels,
// add_labels (creating missing project labels, as GitLab does), remove_labels, assignee_ids
// ([0] or [] unassigns all; unknown ids are ignored) and state_event.
func (s *GitLabServer) glUpdate(w http.ResponseWriter, r *http.Request, p *modelRepo, is *modelIssue) {
	raw, err := glBody(r)
	if err != nil {
		glMessage(w, http.StatusBadRequest, "400 Bad request")
		return
	}
	if v, ok := glString(raw, "description"); ok {
		is.body = v
	}
	if v, ok := glString(raw, "title"); ok && v != "" {
		is.title = v
	}
	if v, ok := glList(raw, "labels"); ok {
		is.labels = nil
		for _, l := range v {
			s.glEnsureLabel(p, l)
			if !slices.Contains(is.labels, l) {
				is.labels = append(is.labels, l)
			}
		}
	}
	if v, ok := glList(raw, "remove_labels"); ok {
		is.labels = slices.DeleteFunc(is.labels, func(l string) bool { return slices.Contains(v, l) })
	}
	if v, ok := glList(raw, "add_labels"); ok {
		for _, l := range v {
			s.glEnsureLabel(p, l)
			if !slices.Contains(is.labels, l) {
				is.labels = append(is.labels, l)
			}
		}
	}
	ids, ok := glIDs(raw, "assignee_ids")
	if !ok {
		if id, ok2 := glIDs(raw, "assignee_id"); ok2 {
			ids, ok = id, true
		}
	}
	if ok {
		is.assignees = nil
		for _, id := range ids {
			for _, u := range s.users {
				if u.id == id && id != 0 && !slices.Contains(is.assignees, u.login) {
					is.assignees = append(is.assignees, u.login)
				}
			}
		}
	}
	if v, ok := glString(raw, "state_event"); ok {
		switch v {
		case "close":
			is.state = "closed"
		case "reopen":
			is.state = "open"
		}
	}
	is.updated = s.now()
	glJSON(w, http.StatusOK, s.glIssueJSON(p, is))
}

func (s *GitLabServer) glListMRs(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	q := r.URL.Query()
	out := []any{}
	mrs := p.allMRsLocked(false)
	slices.Reverse(mrs) // created_at desc
	for _, mi := range mrs {
		if st := q.Get("state"); st != "" && st != "all" && st != glState(mi) {
			continue
		}
		if b := q.Get("source_branch"); b != "" && b != mi.source {
			continue
		}
		if b := q.Get("target_branch"); b != "" && b != mi.target {
			continue
		}
		out = append(out, s.glIssueJSON(p, mi))
	}
	glPaginate(w, r, s.pageSize, out)
}

func (s *GitLabServer) glCreateMR(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	raw, err := glBody(r)
	if err != nil {
		glMessage(w, http.StatusBadRequest, "400 Bad request")
		return
	}
	source, _ := glString(raw, "source_branch")
	target, _ := glString(raw, "target_branch")
	title, _ := glString(raw, "title")
	desc, _ := glString(raw, "description")
	for k, v := range map[string]string{"source_branch": source, "target_branch": target, "title": title} {
		if v == "" {
			glJSON(w, http.StatusBadRequest, map[string]any{"error": k + " is missing"})
			return
		}
	}
	if source == target {
		glMessage(w, http.StatusUnprocessableEntity, []string{"You can't use same project/branch for source and target"})
		return
	}
	if mi := p.openMRLocked(false, source); mi != nil {
		glMessage(w, http.StatusConflict, []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", mi.number)})
		return
	}
	mi := s.newMRLocked(p, s.userLocked(BotLogin), source, target, title, desc)
	glJSON(w, http.StatusCreated, s.glIssueJSON(p, mi))
}

func glJobStatus(st forge.CIState) string {
	switch st {
	case forge.CISuccess:
		return "success"
	case forge.CIFailed:
		return "failed"
	case forge.CISkipped:
		return "skipped"
	}
	return "running"
}

func (s *GitLabServer) glPipelineJSON(p *modelRepo, run *modelRun) map[string]any {
	t := s.clock.Format(time.RFC3339Nano)
	return map[string]any{
		"id": run.id, "iid": run.id, "project_id": p.id, "sha": run.sha, "ref": run.ref,
		"status": run.runStatus(), "source": "push", "created_at": t, "updated_at": t,
		"web_url": fmt.Sprintf("%s/%s/-/pipelines/%d", s.URL, p.path, run.id),
	}
}

func (s *GitLabServer) glPipelines(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	q := r.URL.Query()
	var runs []*modelRun
	for sha, rs := range p.runs {
		if want := q.Get("sha"); want != "" && want != sha {
			continue
		}
		runs = append(runs, rs...)
	}
	slices.SortFunc(runs, func(a, b *modelRun) int { return int(b.id - a.id) }) // order_by=id, sort=desc
	if q.Get("sort") == "asc" {
		slices.Reverse(runs)
	}
	out := []any{}
	for _, run := range runs {
		if st := q.Get("status"); st != "" && st != run.runStatus() {
			continue
		}
		if ref := q.Get("ref"); ref != "" && ref != run.ref {
			continue
		}
		out = append(out, s.glPipelineJSON(p, run))
	}
	glPaginate(w, r, s.pageSize, out)
}

func (s *GitLabServer) glRun(p *modelRepo, id string) *modelRun {
	n, _ := strconv.ParseInt(id, 10, 64)
	for _, rs := range p.runs {
		for _, run := range rs {
			if run.id == n {
				return run
			}
		}
	}
	return nil
}

func (s *GitLabServer) glJobs(w http.ResponseWriter, r *http.Request, p *modelRepo, pid string) {
	run := s.glRun(p, pid)
	if run == nil {
		glMessage(w, http.StatusNotFound, "404 Not found")
		return
	}
	scopes := r.URL.Query()["scope[]"]
	scopes = append(scopes, r.URL.Query()["scope"]...)
	out := []any{}
	for _, j := range run.jobs {
		st := glJobStatus(j.State)
		if len(scopes) > 0 && !slices.Contains(scopes, st) {
			continue
		}
		out = append(out, map[string]any{
			"id": j.id, "name": j.Name, "status": st, "stage": "test", "allow_failure": false,
			"ref": run.ref, "web_url": seedOr(j.WebURL, fmt.Sprintf("%s/%s/-/jobs/%d", s.URL, p.path, j.id)),
			"pipeline": s.glPipelineJSON(p, run), "user": s.glUser(s.userLocked(BotLogin)),
		})
	}
	glPaginate(w, r, s.pageSize, out)
}

func (s *GitLabServer) glTrace(w http.ResponseWriter, p *modelRepo, id string) {
	n, _ := strconv.ParseInt(id, 10, 64)
	for _, rs := range p.runs {
		for _, run := range rs {
			for _, j := range run.jobs {
				if j.id == n {
					w.Header().Set("Content-Type", "text/plain; charset=utf-8")
					_, _ = w.Write([]byte(j.Log))
					return
				}
			}
		}
	}
	glMessage(w, http.StatusNotFound, "404 Not found")
}

// glPaginate writes the page of items asked for with page/per_page and GitLab's offset
// pagination headers.
func glPaginate(w http.ResponseWriter, r *http.Request, capSize int, items []any) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 20
	}
	per = min(per, 100)
	if capSize > 0 {
		per = min(per, capSize)
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	total := len(items)
	pages := max((total+per-1)/per, 1)
	lo, hi := min((page-1)*per, total), min(page*per, total)

	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	link := func(p int, rel string) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		qq := u.Query()
		qq.Set("page", strconv.Itoa(p))
		qq.Set("per_page", strconv.Itoa(per))
		u.RawQuery = qq.Encode()
		return fmt.Sprintf(`<%s>; rel="%s"`, u.String(), rel)
	}
	var links []string
	if page > 1 {
		h.Set("X-Prev-Page", strconv.Itoa(page-1))
		links = append(links, link(page-1, "prev"))
	}
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
		links = append(links, link(page+1, "next"))
	}
	links = append(links, link(1, "first"), link(pages, "last"))
	h.Set("Link", strings.Join(links, ", "))
	glJSON(w, http.StatusOK, items[lo:hi])
}
