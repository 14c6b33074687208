package demo

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

// The page's "open Alfred's pages" button signs the newcomer in on the first click, in a real
// browser: the session cookie (SameSite=Strict) set by the login the demo's page posts to is
// sent on the redirect to /ui/, the two servers being one site (127.0.0.1; ports do not count).
func TestPageButtonSignsInInChromium(t *testing.T) {
	t.Parallel()
	browser := webtest.NewBrowser(t)
	const token = "demo-admin-token-0123456789"
	pages := httptest.NewServer(admin.PageAuth("/ui", token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<html><body><h1>Alfred's pages</h1></body></html>"))
	})))
	t.Cleanup(pages.Close)
	_, base := startPage(t, pages.URL+"/ui/", token)

	tab := browser.Tab(t)
	tab.Open(t, base+"/")
	resp := tab.Click(t, `form[action$="/login"] button`)
	require.NotNil(t, resp)
	require.Equal(t, 200, int(resp.Status))
	require.Equal(t, pages.URL+"/ui/", resp.URL, "the button leads to Alfred's pages")
	dom := tab.DOM(t)
	require.True(t, strings.Contains(dom, "<h1>Alfred's pages</h1>"), "signed in on the first click, not the login form:\n%s", dom)
}
