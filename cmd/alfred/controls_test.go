package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
)

// TestReadyzWhileDraining drains the instance from the pages (signed in, with the form's CSRF
// token, as a browser does) and reads /readyz on the webhook port: 503 "draining" until the
// drain is stopped, then 200 again.
func TestReadyzWhileDraining(t *testing.T) {
	t.Parallel()
	e := startE2E(t, time.Hour)
	adminSrv := httptest.NewServer(e.srv.admin)
	t.Cleanup(adminSrv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	readyz := func() (int, string) { return read(http.Get(e.url + "/readyz")) }
	code, body := readyz()
	require.Equal(t, http.StatusOK, code, body)

	code, page := read(browser.Get(adminSrv.URL + web.Prefix + "/login?token=" + e2eAdminToken + "&next=" + url.QueryEscape(web.Prefix+"/")))
	require.Equal(t, http.StatusOK, code)
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	require.Len(t, token, 2, "the list page carries the drain form")
	drain := func(on string) (int, string) {
		return read(browser.PostForm(adminSrv.URL+web.Prefix+"/drain", url.Values{"csrf": {token[1]}, "on": {on}}))
	}
	code, _ = read(browser.PostForm(adminSrv.URL+web.Prefix+"/drain", url.Values{"on": {"1"}}))
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, _ = readyz()
	require.Equal(t, http.StatusOK, code)

	code, page = drain("1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `id="draining"`)
	require.True(t, e.srv.workers.Draining())
	code, body = readyz()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "draining", strings.TrimSpace(body))

	code, _ = drain("0")
	require.Equal(t, http.StatusOK, code)
	code, body = readyz()
	require.Equal(t, http.StatusOK, code, body)
}
