package forgetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// fjSetup is the state of the setup calls EnableSetup turns on: the site administrator and the
// passwords of the accounts created through the API.
type fjSetup struct {
	admin     string
	passwords map[string]string // lower-case login → password, the administrator's included
	tokens    int64
	secrets   map[int64]string // hook id → the secret it was created with
}

// EnableSetup makes the stand-in answer, besides its usual calls, the calls that set up a
// fresh Forgejo for Alfred, authenticated as Forgejo does with HTTP Basic (user and password):
//
//	POST /admin/users                          (the administrator) create an account
//	POST /users/{login}/tokens                 (that account) create an access token
//	POST /user/repos                           (the administrator) create a repository
//	PUT  /repos/{o}/{r}/collaborators/{login}  (the owner) add a collaborator
//	POST /repos/{o}/{r}/hooks                  (the owner) create a webhook
//
// admin with password is the site administrator (made with `forgejo admin user create
// --admin` on a real server). For these calls no account other than admin exists until
// POST /admin/users creates it; a token created for BotLogin is Token, so the usual calls then
// act as that account. Answers follow Forgejo's (201 with the created object, 204 for a
// collaborator, 401 for wrong credentials, 403 for a non-administrator, 409 for an existing
// repository, 422 for an existing account or a missing field). Call it before the first request.
func (s *ForgejoServer) EnableSetup(admin, password string) {
	s.AddUser(admin)
	s.setup = &fjSetup{admin: admin, passwords: map[string]string{strings.ToLower(admin): password},
		secrets: map[int64]string{}}
}

// serveSetup answers a setup call made with Basic credentials; false when r is not one.
func (s *ForgejoServer) serveSetup(w http.ResponseWriter, r *http.Request, rest string) bool {
	user, pass, basic := r.BasicAuth()
	if s.setup == nil || !basic {
		return false
	}
	seg, err := pathSegments(rest)
	if err != nil {
		return false
	}
	m := r.Method
	var handle func(w http.ResponseWriter, r *http.Request, seg []string, user string)
	switch {
	case len(seg) == 2 && seg[0] == "admin" && seg[1] == "users" && m == http.MethodPost:
		handle = s.setupCreateUser
	case len(seg) == 3 && seg[0] == "users" && seg[2] == "tokens" && m == http.MethodPost:
		handle = s.setupCreateToken
	case len(seg) == 2 && seg[0] == "user" && seg[1] == "repos" && m == http.MethodPost:
		handle = s.setupCreateRepo
	case len(seg) == 5 && seg[0] == "repos" && seg[3] == "collaborators" && m == http.MethodPut:
		handle = s.setupAddCollaborator
	case len(seg) == 4 && seg[0] == "repos" && seg[3] == "hooks" && m == http.MethodPost:
		handle = s.setupCreateHook
	default:
		return false
	}
	s.mu.Lock()
	want, ok := s.setup.passwords[strings.ToLower(user)]
	s.mu.Unlock()
	if !ok || want != pass {
		s.fjError(w, http.StatusUnauthorized, "user's password is invalid [uid: 0, name: "+user+"]")
		return true
	}
	handle(w, r, seg, user)
	return true
}

// decodeSetup decodes the JSON body into v, answering 422 itself when it cannot.
func (s *ForgejoServer) decodeSetup(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, "[]: "+err.Error())
		return false
	}
	return true
}

func (s *ForgejoServer) setupCreateUser(w http.ResponseWriter, r *http.Request, _ []string, user string) {
	if !strings.EqualFold(user, s.setup.admin) {
		s.fjError(w, http.StatusForbidden, "reqSiteAdmin")
		return
	}
	var in struct {
		Username           string `json:"username"`
		Email              string `json:"email"`
		Password           string `json:"password"`
		MustChangePassword *bool  `json:"must_change_password"`
	}
	if !s.decodeSetup(w, r, &in) {
		return
	}
	if in.Username == "" || in.Email == "" || in.Password == "" {
		s.fjError(w, http.StatusUnprocessableEntity, "[Username Email Password]: Required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.setup.passwords[strings.ToLower(in.Username)]; dup {
		s.fjError(w, http.StatusUnprocessableEntity, fmt.Sprintf("user already exists [name: %s]", in.Username))
		return
	}
	s.setup.passwords[strings.ToLower(in.Username)] = in.Password
	u := s.userLocked(in.Username)
	if u == nil {
		u = &modelUser{id: s.nextID(), login: in.Username}
		s.users[strings.ToLower(in.Username)] = u
	}
	fjJSON(w, http.StatusCreated, s.fjUser(u))
}

func (s *ForgejoServer) setupCreateToken(w http.ResponseWriter, r *http.Request, seg []string, user string) {
	if !strings.EqualFold(user, seg[1]) {
		s.fjError(w, http.StatusForbidden, "only the account itself may create its tokens")
		return
	}
	var in struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
	}
	if !s.decodeSetup(w, r, &in) {
		return
	}
	if in.Name == "" {
		s.fjError(w, http.StatusUnprocessableEntity, "[Name]: Required")
		return
	}
	if len(in.Scopes) == 0 {
		s.fjError(w, http.StatusBadRequest, "access token must have a scope")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setup.tokens++
	tok := randomHex(20)
	if strings.EqualFold(user, BotLogin) {
		tok = s.Token
	}
	fjJSON(w, http.StatusCreated, map[string]any{"id": s.setup.tokens, "name": in.Name, "sha1": tok,
		"token_last_eight": tok[len(tok)-8:], "scopes": in.Scopes})
}

func (s *ForgejoServer) setupCreateRepo(w http.ResponseWriter, r *http.Request, _ []string, user string) {
	var in struct {
		Name          string `json:"name"`
		AutoInit      bool   `json:"auto_init"`
		DefaultBranch string `json:"default_branch"`
	}
	if !s.decodeSetup(w, r, &in) {
		return
	}
	if in.Name == "" {
		s.fjError(w, http.StatusUnprocessableEntity, "[Name]: Required")
		return
	}
	path := user + "/" + in.Name
	s.mu.Lock()
	exists := s.repoLocked(path) != nil
	s.mu.Unlock()
	if exists {
		s.fjError(w, http.StatusConflict, "The repository with the same name already exists.")
		return
	}
	s.AddRepo(path, cmp.Or(in.DefaultBranch, "main"), s.URL+"/"+path+".git")
	s.mu.Lock()
	defer s.mu.Unlock()
	fjJSON(w, http.StatusCreated, s.fjRepo(s.repoLocked(path)))
}

// setupRepo returns the repository of seg ("repos", o, r, …) when user owns it, answering
// 404 or 403 itself otherwise.
func (s *ForgejoServer) setupRepo(w http.ResponseWriter, seg []string, user string) (string, bool) {
	path := seg[1] + "/" + seg[2]
	s.mu.Lock()
	p := s.repoLocked(path)
	s.mu.Unlock()
	switch {
	case p == nil:
		s.fjError(w, http.StatusNotFound, "The target couldn't be found.")
		return "", false
	case !strings.EqualFold(seg[1], user):
		s.fjError(w, http.StatusForbidden, "user should be an owner or a collaborator with admin write of a repository")
		return "", false
	}
	return p.path, true
}

func (s *ForgejoServer) setupAddCollaborator(w http.ResponseWriter, r *http.Request, seg []string, user string) {
	repo, ok := s.setupRepo(w, seg, user)
	if !ok {
		return
	}
	var in struct {
		Permission string `json:"permission"`
	}
	if !s.decodeSetup(w, r, &in) {
		return
	}
	level := map[string]int{"read": 20, "write": 30, "admin": 40}[in.Permission]
	s.mu.Lock()
	_, known := s.setup.passwords[strings.ToLower(seg[4])]
	s.mu.Unlock()
	switch {
	case !known:
		s.fjError(w, http.StatusUnprocessableEntity, fmt.Sprintf("user does not exist [uid: 0, name: %s]", seg[4]))
		return
	case level == 0:
		s.fjError(w, http.StatusUnprocessableEntity, "[Permission]: must be read, write or admin")
		return
	}
	s.SetAccessLevel(repo, seg[4], level)
	w.WriteHeader(http.StatusNoContent)
}

func (s *ForgejoServer) setupCreateHook(w http.ResponseWriter, r *http.Request, seg []string, user string) {
	repo, ok := s.setupRepo(w, seg, user)
	if !ok {
		return
	}
	var in struct {
		Type   string            `json:"type"`
		Config map[string]string `json:"config"`
		Events []string          `json:"events"`
		Active bool              `json:"active"`
	}
	if !s.decodeSetup(w, r, &in) {
		return
	}
	switch {
	case !slices.Contains([]string{"forgejo", "gitea"}, in.Type):
		s.fjError(w, http.StatusUnprocessableEntity, "Invalid hook type")
		return
	case in.Config["url"] == "" || !slices.Contains([]string{"json", "form"}, in.Config["content_type"]):
		s.fjError(w, http.StatusUnprocessableEntity, "Missing config option: url or content_type")
		return
	}
	h := forge.Hook{URL: in.Config["url"], ContentType: in.Config["content_type"], Active: in.Active, Events: in.Events}
	h.ID = s.AddHook(repo, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setup.secrets[h.ID] = in.Config["secret"]
	fjJSON(w, http.StatusCreated, map[string]any{"id": h.ID, "type": in.Type, "branch_filter": "*", "active": h.Active,
		"events": h.Events, "config": map[string]string{"url": h.URL, "content_type": h.ContentType},
		"updated_at": fjTime(s.clock), "created_at": fjTime(s.clock), "authorization_header": ""})
}

// HookSecret returns the secret the webhook id was created with through the setup calls
// (EnableSetup), "" when none.
func (s *ForgejoServer) HookSecret(id int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.setup == nil {
		return ""
	}
	return s.setup.secrets[id]
}
