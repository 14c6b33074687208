package admin_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
)

// A browser that opens a page with the token in its URL (/ui/?token=…) gets 400 and the login
// form, which never writes the token back: no redirect to the login form carrying it, not in
// the form's next field, and a sign-in whose next holds it does not send the browser back to
// a URL with the token.
func TestPageAuthNeverEchoesTheTokenFromAPageURL(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-page-token"
	srv := httptest.NewServer(admin.PageAuth("/ui", token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page "+r.URL.String())
	})))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	var hops []string
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		hops = append(hops, req.URL.String())
		return nil
	}}
	for _, p := range []string{"/ui/?token=" + token, "/ui/mailboxes/1?x=1&token=" + token} {
		hops = nil
		req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
		req.Header.Set("Accept", "text/html")
		resp, err := c.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: a token in a URL is refused", p)
		require.Empty(t, hops, "%s: no redirect carries the token", p)
		require.NotContains(t, string(body), token, "%s: the login form writes the token back into the page", p)
		require.Contains(t, string(body), "never accepted in a URL", p)
	}

	// Signing in from a form whose next holds the token goes back to the page without it.
	hops = nil
	resp, err := c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}, "next": {"/ui/mailboxes/1?x=1&token=" + token}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/ui/mailboxes/1?x=1", resp.Request.URL.RequestURI(), "signed in, at the page without the token")
	require.Equal(t, "page /ui/mailboxes/1?x=1", string(body))
	for _, h := range hops {
		require.NotContains(t, h, token)
	}
}
