package admin

import (
	"html/template"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode"
)

// PageCookie is the cookie PageAuth sets after a successful login: the id of a server-side
// session (sessions.go), never the token nor anything derived from it.
const PageCookie = "alfred_ui"

// PageAuth guards the operator pages mounted under prefix with one token (admin.token_file):
// a request passes with "Authorization: Bearer <token>" (the scheme in any case) or with the
// session cookie set by prefix+"/login", which takes the token from a form (POST) and
// redirects to next (a path under prefix). prefix+"/logout" (POST) ends the session. Every
// comparison is constant-time. Anything else is redirected to the login form (pages) or
// answered 401. Tries of a token are limited per client by DefaultAttemptLimits
// (PageAuthLimits); sessions last DefaultSessionTTL and are kept in this process's memory
// (PageAuthWith keeps them in a store).
func PageAuth(prefix, token string, next http.Handler) http.Handler {
	return PageAuthLimits(prefix, token, DefaultAttemptLimits(), next)
}

// PageAuthLimits is PageAuth with the given bounds on tries: a login with a token and a Bearer
// header count against their client's budget (one client's failures never refuse another's
// right token). A try past the budget is answered 429 with Retry-After without being checked;
// a successful try uses no budget.
func PageAuthLimits(prefix, token string, limits AttemptLimits, next http.Handler) http.Handler {
	return PageAuthWith(prefix, token, PageOptions{Limits: limits}, next)
}

// PageOptions are PageAuthWith's settings; the zero value is PageAuth's.
type PageOptions struct {
	// Limits bounds the tries of a token per client; zero means DefaultAttemptLimits. Ignored
	// when Attempts is set.
	Limits AttemptLimits
	// Attempts counts the tries, shared with other handlers (RequireTokenWith) so that a client
	// has one budget for a login and a Bearer header alike; nil means one of this handler's own.
	Attempts *Attempts
	// Sessions keeps the sessions; nil means a MemorySessions of this handler's own.
	// `alfred serve` passes the store, so every replica knows every session.
	Sessions OperatorSessions
	// TTL is a session's life from its login; zero means DefaultSessionTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// PageAuthWith is PageAuth with o's settings. A session the store cannot read or write is
// answered 503 (the operator is not sent to the login form for a database outage).
func PageAuthWith(prefix, token string, o PageOptions, next http.Handler) http.Handler {
	if o.Limits == (AttemptLimits{}) {
		o.Limits = DefaultAttemptLimits()
	}
	if o.Sessions == nil {
		o.Sessions = NewMemorySessions()
	}
	if o.TTL <= 0 {
		o.TTL = DefaultSessionTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Attempts == nil {
		o.Attempts = NewAttempts(o.Limits)
	}
	return pageAuth(prefix, token, o.Attempts, newSessions(o.Sessions, token, o.TTL, o.Now), next)
}

func pageAuth(prefix, token string, tries *Attempts, sessions *sessions, next http.Handler) http.Handler {
	valid := sameToken(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case prefix + "/login":
			pageLogin(w, r, prefix, tries, valid, sessions)
			return
		case prefix + "/logout":
			pageLogout(w, r, prefix, sessions)
			return
		}
		if r.URL.Query().Has("token") {
			// A token in a page's URL is refused, never carried on (not into the login form's
			// address, its next field, or back to the page after a sign-in).
			loginForm(w, http.StatusBadRequest, prefix, pageNext(prefix, r.URL.RequestURI()), false, true)
			return
		}
		if bearer, ok := bearerToken(r); ok {
			done, wait, ok := tries.try(r)
			if !ok {
				tooManyAttempts(w, wait)
				return
			}
			right := valid(bearer)
			done(right)
			if right {
				next.ServeHTTP(w, r)
				return
			}
		}
		if c, err := r.Cookie(PageCookie); err == nil && token != "" {
			ok, err := sessions.valid(r.Context(), c.Value)
			if err != nil {
				sessionsUnavailable(w)
				return
			}
			if ok {
				next.ServeHTTP(w, r)
				return
			}
		}
		if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, prefix+"/login?next="+template.URLQueryEscaper(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="alfred"`)
		http.Error(w, "a token is required (admin.token_file)", http.StatusUnauthorized)
	})
}

// sessionsUnavailable answers 503 when the sessions' store fails.
func sessionsUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, "the sessions' store is unavailable; try again later", http.StatusServiceUnavailable)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Alfred · sign in</title></head>
<body style="font: 14px system-ui, sans-serif; margin: 3em">
<h1>Alfred</h1>
{{if .Failed}}<p style="color: #c92a2a">That token is not the one in admin.token_file.</p>{{end}}
{{if .InURL}}<p style="color: #c92a2a">A token is never accepted in a URL; type it here.</p>{{end}}
<p>Sign in with the operator's token: the content of the file that <code>admin.token_file</code>
names in Alfred's configuration.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="next" value="{{.Next}}">
<label>Token <input type="password" name="token" autofocus></label> <button>Sign in</button>
</form></body></html>`))

// pageNext returns where a login sends the browser: next when it is a path of this site under
// prefix once cleaned ("." and ".." resolved, its query kept but a "token" parameter, which a
// page never takes), else prefix+"/". A backslash or a control character refuses it: browsers
// read "/\" as "//", another host.
func pageNext(prefix, next string) string {
	home := prefix + "/"
	if strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return home
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(clean, home) || strings.HasPrefix(clean, "//") {
		return home
	}
	q := u.RawQuery
	if u.Query().Has("token") {
		v := u.Query()
		v.Del("token")
		q = v.Encode()
	}
	out := (&url.URL{Path: clean, RawQuery: q}).String()
	if !strings.HasPrefix(out, home) {
		return home
	}
	return out
}

func pageLogin(w http.ResponseWriter, r *http.Request, prefix string, tries *Attempts, valid func(string) bool,
	sessions *sessions) {
	next := pageNext(prefix, r.FormValue("next"))
	tok, inURL := "", r.URL.Query().Has("token")
	switch r.Method {
	case http.MethodPost:
		if !inURL {
			tok = r.PostFormValue("token")
		}
	case http.MethodGet:
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	right := false
	if tok != "" {
		done, wait, ok := tries.try(r)
		if !ok {
			tooManyAttempts(w, wait)
			return
		}
		right = valid(tok)
		done(right)
	}
	if right {
		id, expires, err := sessions.create(r.Context())
		if err != nil {
			sessionsUnavailable(w)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: PageCookie, Value: id, Path: prefix, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, Expires: expires})
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	status := http.StatusOK
	switch {
	case inURL:
		status = http.StatusBadRequest // the token, if it was one, is now in a log or a history
	case tok != "":
		status = http.StatusUnauthorized
	}
	loginForm(w, status, prefix, next, tok != "", inURL)
}

// loginForm answers the login form with status, its next field set to next; failed says a
// token was wrong, inURL that one came in a URL.
func loginForm(w http.ResponseWriter, status int, prefix, next string, failed, inURL bool) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct {
		Action, Next  string
		Failed, InURL bool
	}{prefix + "/login", next, failed, inURL})
}

// pageLogout ends the request's session (POST; the cookie is SameSite=Strict, so another site
// cannot end it) and sends the browser to the login form.
func pageLogout(w http.ResponseWriter, r *http.Request, prefix string, sessions *sessions) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if c, err := r.Cookie(PageCookie); err == nil && c.Value != "" {
		if err := sessions.end(r.Context(), c.Value); err != nil {
			sessionsUnavailable(w)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: PageCookie, Value: "", Path: prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	http.Redirect(w, r, prefix+"/login", http.StatusSeeOther)
}
