package admin_test

import (
	"bytes"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
)

func TestPageAuth(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-page-token"
	h := admin.PageAuth("/ui", token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("page " + r.URL.Path))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/ui/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req.Header.Set("Authorization", "Bearer wrong")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"token": {"wrong"}, "next": {"/ui/runs/3"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}, "next": {"/ui/runs/3"}})
	require.NoError(t, err)
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, "page /ui/runs/3", b.String())
	u, _ := url.Parse(srv.URL + "/ui/")
	for _, ck := range jar.Cookies(u) {
		require.NotContains(t, ck.Value, token, "the cookie holds a session id, not the token")
	}

	resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}, "next": {"//evil.example/"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, srv.URL+"/ui/", resp.Request.URL.String(), "next stays under the prefix")

	// A next that only starts with the prefix: the redirect a browser follows stays on this
	// site, under the prefix (a browser reads "/\\" as "//", another host).
	noFollow := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, next := range []string{"/ui/../\\evil.example/x", "/ui/..\\..\\evil.example", "/ui/\\evil.example", "/ui/../../evil", "/ui/%2e%2e/x", "/ui/\t/x"} {
		resp, err = noFollow.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}, "next": {next}})
		require.NoError(t, err)
		_ = resp.Body.Close()
		loc := resp.Header.Get("Location")
		require.True(t, strings.HasPrefix(loc, "/ui/"), "%q → %q", next, loc)
		require.NotContains(t, loc, "\\", "%q → %q", next, loc)
		require.NotContains(t, loc, "..", "%q → %q", next, loc)
	}
}

// The token is never accepted in a URL: a GET or a POST carrying ?token= (even the right one)
// is answered 400 with the form, and no session starts.
func TestPageAuthRefusesTheTokenInAURL(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-page-token"
	srv := httptest.NewServer(admin.PageAuth("/ui", token, page))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(srv.URL + "/ui/login?token=" + token + "&next=/ui/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, err = c.PostForm(srv.URL+"/ui/login?token="+token, url.Values{"next": {"/ui/"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	u, _ := url.Parse(srv.URL + "/ui/")
	require.Empty(t, jar.Cookies(u), "no session")
	resp, err = c.Get(srv.URL + "/ui/?token=" + token)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "on a page too")
}

// A session is a random id that works until logout, and a logged-out cookie replayed is
// refused.
func TestPageSessionLogout(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-page-token"
	srv := httptest.NewServer(admin.PageAuth("/ui", token, page))
	defer srv.Close()
	signIn := func() (*http.Client, string) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}, "next": {"/ui/x"}})
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		u, _ := url.Parse(srv.URL + "/ui/")
		cks := jar.Cookies(u)
		require.Len(t, cks, 1)
		return c, cks[0].Value
	}
	c1, id1 := signIn()
	c2, id2 := signIn()
	require.NotEqual(t, id1, id2, "each login is a session of its own")
	require.Len(t, id1, 64)

	resp, err := c1.PostForm(srv.URL+"/ui/logout", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	for c, want := range map[*http.Client]int{c1: http.StatusUnauthorized, c2: http.StatusOK} {
		resp, err = c.Get(srv.URL + "/ui/x")
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, want, resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/x", nil)
	req.AddCookie(&http.Cookie{Name: admin.PageCookie, Value: id1})
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the ended session's id replayed")
}

// The sign-in form says where the operator finds the token (a newcomer opening /ui/ first).
func TestPageLoginNamesWhereTheTokenIs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(admin.PageAuth("/ui", "0123456789abcdef-page-token", http.NotFoundHandler()))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, srv.URL+"/ui/login?next=%2Fui%2F", resp.Request.URL.String(), "a browser is sent to the form")
	require.Contains(t, b.String(), "<code>admin.token_file</code>")
	require.Contains(t, b.String(), `name="token"`)
}
