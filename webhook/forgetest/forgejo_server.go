package forgetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ForgejoServer is an httptest stand-in for the Forgejo (Gitea-compatible) /api/v1 endpoints
// that webhook/forgejo.Client uses, over in-memory state seeded and read with the Seeder
// methods:
//
//	GET  /version, /user, /users/{login}
//	GET  /repos/{o}/{r}, /repos/{o}/{r}/collaborators/{login}/permission
//	GET|PATCH /repos/{o}/{r}/issues/{index}
//	GET|POST  /repos/{o}/{r}/issues/{index}/comments, PATCH /repos/{o}/{r}/issues/comments/{id}
//	GET|POST  /repos/{o}/{r}/labels, GET /orgs/{org}/labels
//	POST /repos/{o}/{r}/issues/{index}/labels, DELETE /repos/{o}/{r}/issues/{index}/labels/{id}
//	GET|POST  /repos/{o}/{r}/pulls, GET /repos/{o}/{r}/pulls/{index}
//	GET  /repos/{o}/{r}/commits/{ref}/status, /repos/{o}/{r}/commits/{ref}/statuses
//	GET|POST /repos/{o}/{r}/pulls/{index}/reviews, GET|POST …/reviews/{id}/comments
//	POST /repos/{o}/{r}/pulls/{index}/merge, GET /repos/{o}/{r}/branches/{branch}
//	GET  /repos/{o}/{r}/hooks (seeded with AddHook; admins only)
//	GET  /repos/issues/search (assigned=true, state, type, since: see fjSearchIssues)
//	GET  /notifications (all=true, subject-type, since: see fjNotifications)
//	GET  /repos/{o}/{r}/issues/{index}/timeline (since: see fjTimeline)
//	the calls that set up a fresh server, with Basic credentials, once EnableSetup is called
//
// Answers follow the JSON shapes of Forgejo's API (the structs of code.gitea.io/sdk/gitea):
// 401 without "Authorization: token <Token>" (or Bearer), 404 {"message": …, "url": …}, 422
// for validation errors and unknown label ids or assignees, 409 for a second open pull request
// with the same head and base. Issues and pull requests share one index space. Lists are
// paginated with page/limit (default 30, at most 50) with X-Total-Count and a Link header
// (rel next/last/first/prev). Unlike Forgejo, which returns all issue comments at once, the
// comment list is paginated too, so clients are tested on following Link; it honours since
// (RFC 3339, compared with the comment's updated time). The server closes
// when the test ends.
type ForgejoServer struct {
	*model
	// URL is the instance URL to configure as the client's BaseURL (the API is under
	// URL+"/api/v1").
	URL string
	// Token is the only access token the server accepts.
	Token string
	// NoReviewCommentCall makes POST …/pulls/{n}/reviews/{id}/comments answer 404, as Gitea
	// 1.25 does (only Forgejo has that call). Set it before the first request.
	NoReviewCommentCall bool
	// setup holds the setup calls' state once EnableSetup was called (forgejo_setup.go).
	setup *fjSetup
}

var _ Seeder = (*ForgejoServer)(nil)

// NewForgejoServer starts a ForgejoServer with a random Token and only the bot account
// (BotLogin), and stops it in t.Cleanup.
func NewForgejoServer(t testing.TB) *ForgejoServer {
	s := &ForgejoServer{model: newModel(true), Token: randomHex(20)}
	s.URL = listen(t, s.serve)
	return s
}

func (s *ForgejoServer) serve(w http.ResponseWriter, r *http.Request) {
	if s.intercept(r, func(st int) { s.fjError(w, st, http.StatusText(st)) }, func(after int) {
		w.Header().Set("Retry-After", strconv.Itoa(after))
		s.fjError(w, http.StatusTooManyRequests, "rate limit exceeded")
	}) {
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v1/")
	if !ok {
		s.fjError(w, http.StatusNotFound, "not found")
		return
	}
	if rest == "version" && r.Method == http.MethodGet {
		fjJSON(w, http.StatusOK, map[string]string{"version": "11.0.0+gitea-1.22.0"})
		return
	}
	if s.serveSetup(w, r, rest) {
		return
	}
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		tok, _ = strings.CutPrefix(auth, "Bearer ")
	}
	if tok != s.Token {
		s.fjError(w, http.StatusUnauthorized, "invalid username, password or token")
		return
	}
	seg, err := pathSegments(rest)
	if err != nil {
		s.fjError(w, http.StatusBadRequest, "bad path")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.route(w, r, seg)
}

func (s *ForgejoServer) route(w http.ResponseWriter, r *http.Request, seg []string) {
	m := r.Method
	switch {
	case len(seg) == 1 && seg[0] == "user" && m == http.MethodGet:
		fjJSON(w, http.StatusOK, s.fjUser(s.userLocked(BotLogin)))
		return
	case len(seg) == 2 && seg[0] == "users" && m == http.MethodGet:
		u := s.userLocked(seg[1])
		if u == nil {
			s.fjError(w, http.StatusNotFound, fmt.Sprintf("user redirect does not exist [name: %s]", strings.ToLower(seg[1])))
			return
		}
		fjJSON(w, http.StatusOK, s.fjUser(u))
		return
	case len(seg) == 3 && seg[0] == "orgs" && seg[2] == "labels" && m == http.MethodGet:
		labels, ok := s.orgLabels[strings.ToLower(seg[1])]
		if !ok {
			s.fjError(w, http.StatusNotFound, "GetOrgByName")
			return
		}
		out := []any{}
		for _, l := range labels {
			out = append(out, s.fjLabel(l))
		}
		fjPaginateAs(w, r, s.pageSize, out, totalOnly)
		return
	case len(seg) == 3 && seg[0] == "repos" && seg[1] == "issues" && seg[2] == "search" && m == http.MethodGet:
		s.fjSearchIssues(w, r)
		return
	case len(seg) == 4 && seg[0] == "teams" && seg[2] == "members" && m == http.MethodGet:
		s.fjTeamMember(w, seg[1], seg[3])
		return
	case len(seg) == 1 && seg[0] == "notifications" && m == http.MethodGet:
		s.fjNotifications(w, r) // notifications.go
		return
	case len(seg) < 3 || seg[0] != "repos":
		s.fjError(w, http.StatusNotFound, "not found")
		return
	}
	p := s.repoLocked(seg[1] + "/" + seg[2])
	if p == nil {
		s.fjError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	seg = seg[3:]
	switch {
	case len(seg) == 0 && m == http.MethodGet:
		fjJSON(w, http.StatusOK, s.fjRepo(p))
	case len(seg) == 3 && seg[0] == "collaborators" && seg[2] == "permission" && m == http.MethodGet:
		s.fjPermission(w, p, seg[1])
	case len(seg) == 1 && seg[0] == "teams" && m == http.MethodGet:
		s.fjRepoTeams(w, p)
	case len(seg) == 1 && seg[0] == "hooks" && m == http.MethodGet:
		s.fjHooks(w, r, p)
	case len(seg) == 1 && seg[0] == "labels" && m == http.MethodGet:
		out := []any{}
		for _, l := range p.labels {
			out = append(out, s.fjLabel(l))
		}
		fjPaginateAs(w, r, s.pageSize, out, totalOnly)
	case len(seg) == 1 && seg[0] == "labels" && m == http.MethodPost:
		s.fjCreateLabel(w, r, p)
	case len(seg) == 3 && seg[0] == "issues" && seg[1] == "comments" && m == http.MethodPatch:
		s.fjEditComment(w, r, p, seg[2])
	case len(seg) >= 2 && seg[0] == "issues":
		s.fjIssue(w, r, p, seg[1:])
	case len(seg) == 1 && seg[0] == "pulls" && m == http.MethodGet:
		s.fjListPulls(w, r, p)
	case len(seg) == 1 && seg[0] == "pulls" && m == http.MethodPost:
		s.fjCreatePull(w, r, p)
	case len(seg) == 2 && seg[0] == "pulls" && m == http.MethodGet:
		n, _ := strconv.ParseInt(seg[1], 10, 64)
		mi := p.issues[n]
		if mi == nil || !mi.mr {
			s.fjError(w, http.StatusNotFound, "The target couldn't be found.")
			return
		}
		fjJSON(w, http.StatusOK, s.fjPull(p, mi))
	case len(seg) == 3 && seg[0] == "commits" && seg[2] == "status" && m == http.MethodGet:
		s.fjCombined(w, r, p, seg[1])
	case len(seg) == 3 && seg[0] == "commits" && seg[2] == "statuses" && m == http.MethodGet:
		s.fjStatuses(w, r, p, seg[1])
	case len(seg) == 3 && seg[0] == "pulls" && seg[2] == "merge" && m == http.MethodPost:
		s.fjMerge(w, r, p, seg[1])
	case len(seg) >= 2 && seg[0] == "branches" && m == http.MethodGet:
		s.fjGetBranch(w, p, seg[1:])
	case len(seg) >= 3 && seg[0] == "pulls" && seg[2] == "reviews":
		s.fjReviews(w, r, p, seg[1], seg[3:])
	default:
		s.fjError(w, http.StatusNotFound, "not found")
	}
}

func (s *ForgejoServer) fjPermission(w http.ResponseWriter, p *modelRepo, login string) {
	u := s.userLocked(login)
	if u == nil {
		s.fjError(w, http.StatusNotFound, fmt.Sprintf("user redirect does not exist [name: %s]", strings.ToLower(login)))
		return
	}
	// Gitea's GetRepoPermissions: the access mode, which for a team with per-unit rights is the
	// lowest of its units' (a triage team reads "read": its units say more, fjRepoTeams).
	perm := "read" // public repository: everyone reads
	level := p.access[strings.ToLower(u.login)]
	switch owner, _, _ := strings.Cut(p.path, "/"); {
	case strings.EqualFold(owner, u.login):
		perm = "owner"
	case level >= 40:
		perm = "admin"
	case level >= 30:
		perm = "write"
	}
	fjJSON(w, http.StatusOK, map[string]any{"permission": perm, "role_name": perm, "user": s.fjUser(u)})
}

var fjColor = regexp.MustCompile(`^#?[0-9a-fA-F]{6}$`)

// fjCreateLabel creates a label; like Forgejo, it does not refuse a duplicate name.
func (s *ForgejoServer) fjCreateLabel(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	var in struct {
		Name  string `json:"name"`
		Color string `json:"color"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if strings.TrimSpace(in.Name) == "" || !fjColor.MatchString(in.Color) {
		s.fjError(w, http.StatusUnprocessableEntity, "[Name]: Required; [Color]: invalid color")
		return
	}
	l := &modelLabel{id: s.nextID(), name: in.Name, color: "#" + strings.TrimPrefix(in.Color, "#")}
	p.labels = append(p.labels, l)
	fjJSON(w, http.StatusCreated, s.fjLabel(l))
}

func (s *ForgejoServer) fjLabelByID(p *modelRepo, id int64) *modelLabel {
	for _, l := range p.labels {
		if l.id == id {
			return l
		}
	}
	owner, _, _ := strings.Cut(p.path, "/")
	for _, l := range s.orgLabels[strings.ToLower(owner)] {
		if l.id == id {
			return l
		}
	}
	return nil
}

func (s *ForgejoServer) fjLabelByName(p *modelRepo, name string) *modelLabel {
	if l := s.labelLocked(p, name); l != nil {
		return l
	}
	owner, _, _ := strings.Cut(p.path, "/")
	for _, l := range s.orgLabels[strings.ToLower(owner)] {
		if l.name == name {
			return l
		}
	}
	return nil
}

// fjIssue handles /issues/{index}… (seg starts at the index).
func (s *ForgejoServer) fjIssue(w http.ResponseWriter, r *http.Request, p *modelRepo, seg []string) {
	n, err := strconv.ParseInt(seg[0], 10, 64)
	is := p.issues[n]
	if err != nil || is == nil {
		s.fjError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	seg = seg[1:]
	switch m := r.Method; {
	case len(seg) == 0 && m == http.MethodGet:
		fjJSON(w, http.StatusOK, s.fjIssueJSON(p, is))
	case len(seg) == 0 && m == http.MethodPatch:
		s.fjEditIssue(w, r, p, is)
	case len(seg) == 1 && seg[0] == "comments" && m == http.MethodGet:
		since, ok := fjSince(w, r, s)
		if !ok {
			return
		}
		out := []any{}
		for _, c := range commentsSinceLocked(is, since) {
			out = append(out, s.fjCommentJSON(p, is, c))
		}
		fjPaginate(w, r, s.pageSize, out)
	case len(seg) == 1 && seg[0] == "timeline" && m == http.MethodGet:
		s.fjTimeline(w, r, p, is)
	case len(seg) == 1 && seg[0] == "comments" && m == http.MethodPost:
		var in struct {
			Body string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || strings.TrimSpace(in.Body) == "" {
			s.fjError(w, http.StatusUnprocessableEntity, "[Body]: Required")
			return
		}
		s.addCommentLocked(is, s.userLocked(BotLogin), in.Body, false)
		fjJSON(w, http.StatusCreated, s.fjCommentJSON(p, is, is.comments[len(is.comments)-1]))
	case len(seg) == 1 && seg[0] == "labels" && m == http.MethodPost:
		defer s.recordLocked(is, s.userLocked(BotLogin), snap(is))
		var in struct {
			Labels []int64 `json:"labels"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			s.fjError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		for _, id := range in.Labels {
			l := s.fjLabelByID(p, id)
			if l == nil {
				s.fjError(w, http.StatusUnprocessableEntity, fmt.Sprintf("label does not exist [label_id: %d]", id))
				return
			}
			if !slices.Contains(is.labels, l.name) {
				is.labels = append(is.labels, l.name)
			}
		}
		is.updated = s.now()
		fjJSON(w, http.StatusOK, s.fjIssueLabels(p, is))
	case len(seg) == 2 && seg[0] == "labels" && m == http.MethodDelete:
		defer s.recordLocked(is, s.userLocked(BotLogin), snap(is))
		id, _ := strconv.ParseInt(seg[1], 10, 64)
		l := s.fjLabelByID(p, id)
		if l == nil {
			s.fjError(w, http.StatusUnprocessableEntity, fmt.Sprintf("label does not exist [label_id: %d]", id))
			return
		}
		is.labels = slices.DeleteFunc(is.labels, func(n string) bool { return n == l.name })
		is.updated = s.now()
		w.WriteHeader(http.StatusNoContent)
	default:
		s.fjError(w, http.StatusNotFound, "not found")
	}
}

// fjEditIssue applies PATCH /issues/{index}: title (when not empty), body, state and
// assignees (absent or null: unchanged; []: none; an unknown login: 422).
func (s *ForgejoServer) fjEditIssue(w http.ResponseWriter, r *http.Request, p *modelRepo, is *modelIssue) {
	var in struct {
		Title     string    `json:"title"`
		Body      *string   `json:"body"`
		Assignees *[]string `json:"assignees"`
		State     *string   `json:"state"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	before := snap(is)
	defer s.recordLocked(is, s.userLocked(BotLogin), before)
	if in.Assignees != nil {
		var next []string
		for _, a := range *in.Assignees {
			u := s.userLocked(a)
			if u == nil {
				s.fjError(w, http.StatusUnprocessableEntity, fmt.Sprintf("user does not exist [uid: 0, name: %s]", a))
				return
			}
			if !slices.Contains(next, u.login) {
				next = append(next, u.login)
			}
		}
		is.assignees = next
	}
	if in.Title != "" {
		is.title = in.Title
	}
	if in.Body != nil {
		is.body = *in.Body
	}
	if in.State != nil && is.state != "merged" {
		is.state = *in.State
	}
	is.updated = s.now()
	fjJSON(w, http.StatusCreated, s.fjIssueJSON(p, is)) // Forgejo answers 201 here
}

func (s *ForgejoServer) fjEditComment(w http.ResponseWriter, r *http.Request, p *modelRepo, idStr string) {
	id, _ := strconv.ParseInt(idStr, 10, 64)
	is, c := s.findCommentLocked(p, id)
	if c == nil || c.system {
		s.fjError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || strings.TrimSpace(in.Body) == "" {
		s.fjError(w, http.StatusUnprocessableEntity, "[Body]: Required")
		return
	}
	c.body, c.updated = in.Body, s.now()
	fjJSON(w, http.StatusOK, s.fjCommentJSON(p, is, c))
}

func (s *ForgejoServer) fjListPulls(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	state := seedOr(r.URL.Query().Get("state"), "open")
	out := []any{}
	mrs := p.allMRsLocked(true)
	slices.Reverse(mrs) // newest first
	for _, mi := range mrs {
		if state != "all" && fjState(mi) != state {
			continue
		}
		out = append(out, s.fjPull(p, mi))
	}
	fjPaginate(w, r, s.pageSize, out)
}

func (s *ForgejoServer) fjCreatePull(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	var in struct {
		Head  string `json:"head"`
		Base  string `json:"base"`
		Title string `json:"title"`
		Body  string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	switch {
	case in.Head == "" || in.Base == "" || strings.TrimSpace(in.Title) == "":
		s.fjError(w, http.StatusUnprocessableEntity, "[Head]: Required; [Base]: Required; [Title]: Required")
		return
	case in.Head == in.Base:
		s.fjError(w, http.StatusUnprocessableEntity, "Invalid PullRequest: There are no changes between the head and the base")
		return
	}
	for _, mi := range p.allMRsLocked(true) {
		if mi.state == "open" && mi.source == in.Head && mi.target == in.Base {
			s.fjError(w, http.StatusConflict, fmt.Sprintf(
				"pull request already exists for these targets [id: %d, issue_id: %d, head_repo_id: %d, base_repo_id: %d, head_branch: %s, base_branch: %s]",
				mi.id, mi.id, p.id, p.id, in.Head, in.Base))
			return
		}
	}
	mi := s.newMRLocked(p, s.userLocked(BotLogin), in.Head, in.Base, in.Title, in.Body)
	fjJSON(w, http.StatusCreated, s.fjPull(p, mi))
}

// fjCombined answers the combined status of the latest run for ref as Forgejo does
// (routers/api/v1/repo/status.go, GetLatestCommitStatus): a page (page, limit: 30 by default,
// 50 at most) of the latest status of each context, the most recently set first, and as state
// the worst of that page only by Forgejo's order error < failure < warning < pending < success;
// X-Total-Count counts every context. An empty object (state "", no statuses) when nothing ran.
func (s *ForgejoServer) fjCombined(w http.ResponseWriter, r *http.Request, p *modelRepo, ref string) {
	runs := p.runs[ref]
	if len(runs) == 0 || len(runs[len(runs)-1].jobs) == 0 {
		fjJSON(w, http.StatusOK, map[string]any{"state": "", "sha": "", "total_count": 0, "statuses": nil, "repository": nil, "commit_url": "", "url": ""})
		return
	}
	jobs := slices.Clone(runs[len(runs)-1].jobs)
	slices.Reverse(jobs) // the most recently set first
	pw := cutPage(r.URL.Query(), "limit", 30, 50, s.pageSize, len(jobs))
	rank := map[string]int{"error": 0, "failure": 1, "warning": 2, "pending": 3, "success": 4}
	state := "success"
	statuses := []any{}
	for _, j := range jobs[pw.lo:pw.hi] {
		st := fjStatusState(j.State)
		if rank[st] < rank[state] {
			state = st
		}
		statuses = append(statuses, s.fjStatus(p, ref, j))
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(jobs)))
	fjJSON(w, http.StatusOK, map[string]any{
		"state": state, "sha": ref, "total_count": len(statuses), "statuses": statuses, "repository": s.fjRepo(p),
		"commit_url": fmt.Sprintf("%s/api/v1/repos/%s/commits/%s", s.URL, p.path, ref),
		"url":        fmt.Sprintf("%s/api/v1/repos/%s/commits/%s/status", s.URL, p.path, ref),
	})
}

// fjStatuses answers GET /repos/{o}/{r}/commits/{ref}/statuses: every status of the latest run
// for ref, in pages (page, limit) with X-Total-Count and Link. sort=leastindex orders them by
// index, oldest first, as Forgejo does. Forgejo's default order is by creation time in whole
// seconds with no tiebreak, so statuses set within one second come in an order each page's
// query may choose anew: here, the model's statuses share one second, and odd pages list them
// newest first, even pages oldest first, so that paging the default order skips some and
// repeats others, as it can on Forgejo.
func (s *ForgejoServer) fjStatuses(w http.ResponseWriter, r *http.Request, p *modelRepo, ref string) {
	out := []any{}
	if runs := p.runs[ref]; len(runs) > 0 {
		jobs := slices.Clone(runs[len(runs)-1].jobs) // in index order
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if r.URL.Query().Get("sort") != "leastindex" && max(page, 1)%2 == 1 {
			slices.Reverse(jobs)
		}
		for _, j := range jobs {
			out = append(out, s.fjStatus(p, ref, j))
		}
	}
	fjPaginate(w, r, s.pageSize, out)
}

// fjStatus is a commit status of ref in Forgejo's JSON.
func (s *ForgejoServer) fjStatus(p *modelRepo, ref string, j *modelJob) map[string]any {
	return map[string]any{
		"id": j.id, "status": fjStatusState(j.State), "target_url": j.WebURL, "description": j.Log,
		"url": fmt.Sprintf("%s/api/v1/repos/%s/statuses/%s", s.URL, p.path, ref), "context": j.Name,
		"creator": s.fjUser(s.userLocked(BotLogin)), "created_at": fjTime(s.clock), "updated_at": fjTime(s.clock),
	}
}

// fjRepoTeams is GET /repos/{o}/{r}/teams: the teams with access, each with its units_map, as
// Gitea answers them (a user's repository has none: an empty list).
func (s *ForgejoServer) fjRepoTeams(w http.ResponseWriter, p *modelRepo) {
	out := []any{}
	for _, t := range p.teams {
		perm := "read"
		for _, v := range t.units {
			if v == "admin" {
				perm = "admin"
			}
		}
		out = append(out, map[string]any{"id": t.id, "name": t.name, "description": "", "permission": perm,
			"includes_all_repositories": false, "can_create_org_repo": false, "units_map": t.units,
			"units": slices.Collect(maps.Keys(t.units))})
	}
	fjJSON(w, http.StatusOK, out)
}

// fjTeamMember is GET /teams/{id}/members/{username}: the user when they are in the team, 404
// otherwise.
func (s *ForgejoServer) fjTeamMember(w http.ResponseWriter, idStr, login string) {
	id, _ := strconv.ParseInt(idStr, 10, 64)
	for _, r := range s.repos {
		for _, t := range r.teams {
			if t.id != id {
				continue
			}
			if u := s.userLocked(login); u != nil && slices.Contains(t.members, strings.ToLower(login)) {
				fjJSON(w, http.StatusOK, s.fjUser(u))
				return
			}
			s.fjError(w, http.StatusNotFound, "not found")
			return
		}
	}
	s.fjError(w, http.StatusNotFound, "team not found")
}
