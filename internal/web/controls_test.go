package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

const pageToken = "page-token-for-the-controls-test"

// setupControls serves the pages of setup's mailboxes with Memory as their Controls, behind
// the page login as cmd mounts them. Their pages reload themselves hourly, not every 2 s: a
// mailbox with a running run has a self-reloading page, and a reload that starts as a click
// lands can win over the click's form, which is then never sent (seen under load: Resume
// clicked, the page still paused, no "resumed" in the timeline). The reload itself is
// TestPages'.
func setupControls(t *testing.T) (*webtest.Memory, string) {
	t.Helper()
	b := setup(t)
	h, err := web.New(web.Config{Reader: b.mem, Logs: b.mem, Settings: b.mem, Controls: b.mem,
		CSRFKey: []byte("a csrf key of at least 16 bytes"), Now: func() time.Time { return t0 },
		Redact: func(s string) string { return s }, Refresh: time.Hour})
	require.NoError(t, err)
	srv := httptest.NewServer(admin.PageAuth(web.Prefix, pageToken, h))
	t.Cleanup(srv.Close)
	return b.mem, srv.URL
}

// signIn signs in with the login form in tab (the token is never in a URL) and lands on path.
func signIn(t *testing.T, tab *webtest.Tab, base, path string) {
	t.Helper()
	tab.SignIn(t, base+web.Prefix+"/login?next="+url.QueryEscape(web.Prefix+path), pageToken)
}

func timelineOf(t *testing.T, mem *webtest.Memory, id int64) string {
	t.Helper()
	mb, err := mem.Mailbox(t.Context(), id)
	require.NoError(t, err)
	var out []string
	for _, e := range mb.Timeline {
		out = append(out, e.Kind+": "+e.Text)
	}
	return strings.Join(out, "\n")
}

func TestControlsPauseAndResumeInChromium(t *testing.T) {
	t.Parallel()
	mem, base := setupControls(t)
	tab := webtest.NewBrowser(t).Tab(t)
	signIn(t, tab, base, "/mailboxes/2")
	require.Contains(t, tab.DOM(t), "Pause this mailbox")

	resp := tab.Click(t, "#pause-mailbox")
	require.EqualValues(t, http.StatusOK, resp.Status)
	dom := tab.DOM(t)
	tab.Screenshot(t, "controls-paused")
	require.Contains(t, dom, `id="paused"`)
	require.Contains(t, dom, "Resume this mailbox")
	require.Regexp(t, `operator \(session [0-9a-f]{8}\) from 127\.0\.0\.1 paused the mailbox`, dom, "the timeline says who")

	tab.Click(t, "#pause-mailbox") // now "Resume"
	dom = tab.DOM(t)
	require.NotContains(t, dom, `id="paused"`)
	require.Contains(t, dom, "resumed the mailbox")

	tab.Click(t, "#pause-project")
	dom = tab.DOM(t)
	require.Contains(t, dom, "project paused")
	require.Contains(t, dom, "Resume project alice/shop")
	tab.Open(t, base+web.Prefix+"/")
	require.Contains(t, tab.DOM(t), `<span class="badge paused">paused</span>`)
	tab.Open(t, base+web.Prefix+"/mailboxes/1") // the project's other mailbox
	tab.Click(t, "#pause-project")
	require.NotContains(t, tab.DOM(t), "project paused")

	var whats []string
	for _, a := range mem.Actions() {
		whats = append(whats, a.What+" "+a.Target)
		require.Contains(t, a.By, "from 127.0.0.1")
	}
	require.Equal(t, []string{"pause 2", "resume 2", "pause project gitea:alice/shop", "resume project gitea:alice/shop"}, whats)
}

func TestControlsCancelRunInChromium(t *testing.T) {
	t.Parallel()
	mem, base := setupControls(t)
	tab := webtest.NewBrowser(t).Tab(t)
	signIn(t, tab, base, "/runs/21")
	require.Contains(t, tab.DOM(t), "Cancel run")
	resp := tab.Click(t, "#cancel")
	require.EqualValues(t, http.StatusOK, resp.Status)
	dom := tab.DOM(t)
	tab.Screenshot(t, "controls-cancelled")
	require.Contains(t, dom, `<span class="badge interrupted">interrupted</span>`)
	require.NotContains(t, dom, "Cancel run", "a finished run has nothing to cancel")
	require.Contains(t, timelineOf(t, mem, 2), "cancelled run 21")
	require.Len(t, mem.Actions(), 1)
}

func TestControlsDrainInChromium(t *testing.T) {
	t.Parallel()
	mem, base := setupControls(t)
	mem.SetReplicas(web.Replica{ID: "alfred-0", SeenAt: t0}, web.Replica{ID: "alfred-1", SeenAt: t0})
	tab := webtest.NewBrowser(t).Tab(t)
	signIn(t, tab, base, "/")
	dom := tab.DOM(t)
	require.NotContains(t, dom, `id="draining"`)
	require.Contains(t, dom, "Drain the installation")
	require.Regexp(t, `data-replica="alfred-0">.*<span class="badge claiming">claiming</span>`, dom)
	// The replicas record themselves as they follow the drain: one still in a pass, one done.
	mem.SetReplicas(web.Replica{ID: "alfred-0", SeenAt: t0, Draining: true}, web.Replica{ID: "alfred-1", SeenAt: t0, Draining: true, Drained: true})
	tab.Click(t, "#drain button")
	dom = tab.DOM(t)
	tab.Screenshot(t, "controls-draining")
	require.Contains(t, dom, `id="draining"`)
	require.Contains(t, dom, "Stop draining")
	require.Regexp(t, `data-replica="alfred-0">.*<span class="badge draining">draining</span>`, dom)
	require.Regexp(t, `data-replica="alfred-1">.*<span class="badge drained">drained</span>`, dom)
	require.True(t, mem.Draining())
	tab.Open(t, base+web.Prefix+"/mailboxes/2")
	require.Contains(t, tab.DOM(t), `id="draining"`, "every page shows the drain")
	tab.Open(t, base+web.Prefix+"/")
	tab.Click(t, "#drain button")
	require.NotContains(t, tab.DOM(t), `id="draining"`)
	require.False(t, mem.Draining())

	tab.Click(t, "#pause-all button")
	dom = tab.DOM(t)
	require.Contains(t, dom, `id="paused-all"`)
	require.Contains(t, dom, "Resume all claims")
	tab.Click(t, "#pause-all button")
	require.Contains(t, tab.DOM(t), "Pause all claims")
	var whats []string
	for _, a := range mem.Actions() {
		whats = append(whats, a.What+" "+a.Target)
	}
	require.Equal(t, []string{"drain true", "drain false", "pause all true", "pause all false"}, whats)
}

func TestControlsWithoutCSRFTokenRefusedInChromium(t *testing.T) {
	t.Parallel()
	mem, base := setupControls(t)
	tab := webtest.NewBrowser(t).Tab(t)
	signIn(t, tab, base, "/mailboxes/2")
	// Signed in, same origin, but the form's token is not the session's.
	tab.SetValue(t, `#controls input[name="csrf"]`, "")
	resp := tab.Click(t, "#pause-mailbox")
	require.EqualValues(t, http.StatusForbidden, resp.Status)
	require.Contains(t, tab.DOM(t), "CSRF token is missing or wrong")
	require.Empty(t, mem.Actions())
}

// The forms' answers at their edges: the login is needed, then the token; a right token from
// another browser session is refused too.
func TestControlsRefusals(t *testing.T) {
	t.Parallel()
	mem, base := setupControls(t)
	u := base + web.Prefix + "/mailboxes/2/pause"
	post := func(form url.Values, header http.Header) int {
		req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header = header
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, post(url.Values{}, http.Header{}), "no login")
	auth := http.Header{"Authorization": {"Bearer " + pageToken}}
	require.Equal(t, http.StatusForbidden, post(url.Values{}, auth), "no CSRF token")
	require.Equal(t, http.StatusForbidden, post(url.Values{"csrf": {"00"}}, auth), "no CSRF cookie")

	// A token taken from one session does not pass with another session's cookie.
	req, err := http.NewRequest(http.MethodGet, base+web.Prefix+"/mailboxes/2", nil)
	require.NoError(t, err)
	req.Header = auth.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	var body strings.Builder
	_, _ = io.Copy(&body, resp.Body)
	resp.Body.Close()
	token := csrfValue.FindStringSubmatch(body.String())
	require.Len(t, token, 2)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == web.CSRFCookie {
			cookie = c
		}
	}
	require.NotNil(t, cookie)
	other := auth.Clone()
	other.Set("Cookie", web.CSRFCookie+"=0123456789abcdef0123456789abcdef")
	require.Equal(t, http.StatusForbidden, post(url.Values{"csrf": {token[1]}}, other))
	require.Empty(t, mem.Actions())

	same := auth.Clone()
	same.Set("Cookie", web.CSRFCookie+"="+cookie.Value)
	require.Equal(t, http.StatusSeeOther, post(url.Values{"csrf": {token[1]}}, same), "the session's own token passes")
	require.Len(t, mem.Actions(), 1)

	// Another site's form is refused whatever it carries.
	cross := same.Clone()
	cross.Set("Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, post(url.Values{"csrf": {token[1]}}, cross))
	require.Len(t, mem.Actions(), 1)
}

var csrfValue = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
