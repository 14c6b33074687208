package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// PageCookie is the cookie PageAuth sets after a successful login.
const PageCookie = "alfred_ui"

// PageAuth guards the operator pages mounted under prefix with one token (admin.token_file):
// a request passes with "Authorization: Bearer <token>" (the scheme in any case) or with the
// cookie set by prefix+"/login", which takes the token from a form (POST) or, for scripts and
// headless browsers, from ?token= (GET), and redirects to ?next= (a path under prefix). The
// cookie holds an HMAC of the token, not the token; every comparison is constant-time.
// Anything else is redirected to the login form (pages) or answered 401. Tries of a token are
// limited by DefaultAttemptLimits (PageAuthLimits).
func PageAuth(prefix, token string, next http.Handler) http.Handler {
	return PageAuthLimits(prefix, token, DefaultAttemptLimits(), next)
}

// PageAuthLimits is PageAuth with the given bounds on tries: a login with a token counts
// against its address's budget and the overall one, a Bearer header against its address's
// only (so that a flood from elsewhere does not lock out a scraper holding the token). A try
// past the budget is answered 429 with Retry-After without being checked; a successful try
// uses no budget.
func PageAuthLimits(prefix, token string, limits AttemptLimits, next http.Handler) http.Handler {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("alfred operator pages"))
	cookie := hex.EncodeToString(mac.Sum(nil))
	valid := func(got, want string) bool {
		return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
	}
	tries := newAttempts(limits)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == prefix+"/login" {
			pageLogin(w, r, prefix, tries, func(t string) bool { return valid(t, token) }, cookie)
			return
		}
		if bearer, ok := bearerToken(r); ok {
			done, wait, ok := tries.try(r, false)
			if !ok {
				tooManyAttempts(w, wait)
				return
			}
			right := valid(bearer, token)
			done(right)
			if right {
				next.ServeHTTP(w, r)
				return
			}
		}
		if c, err := r.Cookie(PageCookie); err == nil && valid(c.Value, cookie) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, prefix+"/login?next="+template.URLQueryEscaper(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="alfred"`)
		http.Error(w, "a token is required (admin.token_file)", http.StatusUnauthorized)
	})
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Alfred · sign in</title></head>
<body style="font: 14px system-ui, sans-serif; margin: 3em">
<h1>Alfred</h1>
{{if .Failed}}<p style="color: #c92a2a">That token is not the one in admin.token_file.</p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="next" value="{{.Next}}">
<label>Token <input type="password" name="token" autofocus></label> <button>Sign in</button>
</form></body></html>`))

func pageLogin(w http.ResponseWriter, r *http.Request, prefix string, tries *attempts, valid func(string) bool, cookie string) {
	next := r.FormValue("next")
	if !strings.HasPrefix(next, prefix+"/") || strings.HasPrefix(next, "//") {
		next = prefix + "/"
	}
	tok := ""
	switch r.Method {
	case http.MethodPost:
		tok = r.PostFormValue("token")
	case http.MethodGet:
		tok = r.URL.Query().Get("token")
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	right := false
	if tok != "" {
		done, wait, ok := tries.try(r, true)
		if !ok {
			tooManyAttempts(w, wait)
			return
		}
		right = valid(tok)
		done(right)
	}
	if right {
		http.SetCookie(w, &http.Cookie{Name: PageCookie, Value: cookie, Path: prefix, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, Expires: time.Now().Add(30 * 24 * time.Hour)})
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	status := http.StatusOK
	if tok != "" {
		status = http.StatusUnauthorized
	}
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct {
		Action, Next string
		Failed       bool
	}{prefix + "/login", next, tok != ""})
}
