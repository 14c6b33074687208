package forgetest

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
//	GET|POST /projects/:id/merge_requests/:iid/discussions, POST …/discussions/:id/notes,
//	PUT …/discussions/:id (resolved), POST /projects/:id/merge_requests/:iid/approve
//	GET /projects/:id/merge_requests/:iid/approvals, PUT /projects/:id/merge_requests/:iid/merge
//	GET  /projects/:id/pipelines, /projects/:id/pipelines/:id/jobs, …/pipelines/:id/bridges,
//	     /projects/:id/jobs/:id/trace
//	GET  /projects/:id/repository/commits/:sha (parent_ids: a merged-results merge commit's),
//	     /projects/:id/repository/commits/:sha/merge_requests
//	GET  /issues (assignee_username, state=opened, scope=all, updated_after: glAssignedIssues)
//	GET  /todos (state=pending: glTodos), /merge_requests (author_username, state=all, scope=all,
//	     updated_after: glMergeRequests), both derived from the model (notifications.go)
//	GET  /projects/:id/issues/:iid/resource_label_events, …/resource_state_events
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
}

var _ Seeder = (*GitLabServer)(nil)

// NewGitLabServer starts a GitLabServer with a random Token and only the bot account
// (BotLogin), and stops it in t.Cleanup.
func NewGitLabServer(t testing.TB) *GitLabServer {
	s := &GitLabServer{model: newModel(false), Token: "glpat-" + randomHex(10)}
	s.URL = listen(t, s.serve)
	return s
}

func (s *GitLabServer) serve(w http.ResponseWriter, r *http.Request) {
	if s.intercept(r, func(st int) { glMessage(w, st, http.StatusText(st)) }, func(after int) {
		// GitLab's rate-limit answer: 429 "Retry later" with Retry-After and RateLimit-* headers.
		w.Header().Set("Retry-After", strconv.Itoa(after))
		w.Header().Set("RateLimit-Reset", strconv.FormatInt(time.Now().Unix()+int64(after), 10))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("Retry later\n"))
	}) {
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
	seg, err := pathSegments(rest)
	if err != nil {
		glMessage(w, http.StatusBadRequest, "400 Bad request")
		return
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
	case len(seg) == 1 && seg[0] == "issues" && get:
		s.glAssignedIssues(w, r)
		return
	case len(seg) == 1 && seg[0] == "todos" && get:
		s.glTodos(w, r) // notifications.go
		return
	case len(seg) == 1 && seg[0] == "merge_requests" && get:
		s.glMergeRequests(w, r) // notifications.go
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
	case len(seg) == 4 && seg[0] == "repository" && seg[1] == "commits" && seg[3] == "merge_requests" && get:
		s.glCommitMRs(w, r, p, seg[2])
	case len(seg) == 3 && seg[0] == "repository" && seg[1] == "commits" && get:
		glJSON(w, http.StatusOK, map[string]any{"id": seg[2], "short_id": seg[2][:min(8, len(seg[2]))],
			"parent_ids": p.commitParentsLocked(seg[2]), "title": "", "message": ""})
	case len(seg) == 1 && seg[0] == "pipelines" && get:
		s.glPipelines(w, r, p)
	case len(seg) == 3 && seg[0] == "pipelines" && seg[2] == "jobs" && get:
		s.glJobs(w, r, p, seg[1], false)
	case len(seg) == 3 && seg[0] == "pipelines" && seg[2] == "bridges" && get:
		s.glJobs(w, r, p, seg[1], true)
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
	case len(seg) >= 1 && seg[0] == "notes":
		s.glNotes(w, r, p, is, seg[1:])
	case mr && len(seg) >= 1 && seg[0] == "discussions":
		s.glDiscussions(w, r, p, is, seg[1:])
	case mr && len(seg) == 1 && seg[0] == "approve" && r.Method == http.MethodPost:
		glJSON(w, http.StatusCreated, map[string]any{"iid": is.number, "approved": true,
			"approved_by": []any{map[string]any{"user": s.glUser(s.userLocked(BotLogin))}}})
	case mr && len(seg) == 1 && seg[0] == "approvals" && r.Method == http.MethodGet:
		s.glApprovals(w, p, is)
	case mr && len(seg) == 1 && seg[0] == "reviewers" && r.Method == http.MethodGet:
		s.glReviewers(w, is)
	case mr && len(seg) == 1 && seg[0] == "versions" && r.Method == http.MethodGet:
		s.glVersions(w, is)
	case mr && len(seg) == 1 && seg[0] == "merge" && r.Method == http.MethodPut:
		s.glMerge(w, r, p, is)
	case len(seg) == 1 && (seg[0] == "resource_label_events" || seg[0] == "resource_state_events") && r.Method == http.MethodGet:
		s.glResourceEvents(w, r, p, is, seg[0])
	default:
		glMessage(w, http.StatusNotFound, "404 Not Found")
	}
}

// glNotes handles …/notes and …/notes/:note_id of an issue or merge request (seg starts after
// "notes").
func (s *GitLabServer) glNotes(w http.ResponseWriter, r *http.Request, p *modelRepo, is *modelIssue, seg []string) {
	switch {
	case len(seg) == 0 && r.Method == http.MethodGet:
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
	case len(seg) == 0 && r.Method == http.MethodPost:
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
	case len(seg) == 1 && (r.Method == http.MethodPut || r.Method == http.MethodGet):
		nid, _ := strconv.ParseInt(seg[0], 10, 64)
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
	before := snap(is)
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
	s.recordLocked(is, s.userLocked(BotLogin), before)
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
