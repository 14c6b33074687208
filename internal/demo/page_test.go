package demo

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// startPage serves a demo forge without a webhook whose page links to Alfred's pages at
// pagesURL (signing in with adminToken), its issue filed, and returns it with its server's URL.
func startPage(t *testing.T, pagesURL, adminToken string) (*Forge, string) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f, err := New(Config{Dir: t.TempDir(), URL: srv.URL, NoWebhook: true, PagesURL: pagesURL, AdminToken: adminToken})
	require.NoError(t, err)
	mux.Handle("/", f.Handler())
	require.NoError(t, f.Open(context.Background()))
	return f, srv.URL
}

// get reads url without following redirects and returns the answer's status, Location and body.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// The web addresses the stand-in's API gives (the issue's html_url, which Alfred's pages link
// to, its comments', the repository's, the accounts') lead to the demo's page; others are 404.
func TestPageServesTheForgesWebAddresses(t *testing.T) {
	t.Parallel()
	f, base := startPage(t, "http://127.0.0.1:1/ui/", "demo-admin-token")
	issue := f.filed()
	id := f.fj.AddComment(issue, Bot, "I'm on it.")

	var urls []string
	for _, api := range []string{
		"/api/v1/repos/" + Repo + "/issues/" + itoa(issue.Number),
		"/api/v1/repos/" + Repo + "/issues/" + itoa(issue.Number) + "/comments",
		"/api/v1/repos/" + Repo,
	} {
		req, _ := http.NewRequest(http.MethodGet, base+api, nil)
		req.Header.Set("Authorization", "token "+f.Token())
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var doc any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc), api)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, api)
		urls = append(urls, htmlURLs(doc)...)
	}
	require.Contains(t, urls, base+"/"+Repo+"/issues/"+itoa(issue.Number), "the issue's own address")
	require.Contains(t, urls, base+"/"+Repo+"/issues/"+itoa(issue.Number)+"#issuecomment-"+itoa(id), "the comment's")
	require.Contains(t, urls, base+"/"+Human, "alice's")
	urls = append(urls, base+"/"+Repo+"/pulls/2")
	for _, u := range urls {
		require.True(t, strings.HasPrefix(u, base+"/"), u)
		code, loc, _ := get(t, strings.SplitN(u, "#", 2)[0])
		require.Equal(t, http.StatusSeeOther, code, u)
		require.Equal(t, "/", loc, u)
	}
	code, _, _ := get(t, base+"/someone-else/other")
	require.Equal(t, http.StatusNotFound, code, "an address of no account the demo has")
}

// The page shows the issue's text and comments as a forge renders Markdown: Alfred's hidden
// markers stay hidden, its tables are tables, and markup in a comment is not passed through.
func TestPageRendersTheTextsAsAForge(t *testing.T) {
	t.Parallel()
	f, base := startPage(t, "http://127.0.0.1:1/ui/", "demo-admin-token")
	issue := f.filed()
	f.fj.AddComment(issue, Bot, "<!-- alfred:key=ack-1:kind=ack -->\nI'm on it.\n\n| question | default |\n|---|---|\n| q1 | a |")
	f.fj.AddComment(issue, Human, "thanks <script>alert(1)</script>")

	code, _, page := get(t, base+"/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, "<p>"+issueBody+"</p>")
	require.Contains(t, page, "<p>I'm on it.</p>")
	require.Contains(t, page, "<td>q1</td>")
	require.NotContains(t, page, "alfred:key", "a hidden marker is shown")
	require.NotContains(t, page, "<script>alert", "a comment's markup is passed through")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// htmlURLs returns every "html_url" in a decoded JSON document.
func htmlURLs(doc any) []string {
	var out []string
	switch d := doc.(type) {
	case map[string]any:
		for k, v := range d {
			if s, ok := v.(string); ok && k == "html_url" {
				out = append(out, s)
			}
			out = append(out, htmlURLs(v)...)
		}
	case []any:
		for _, v := range d {
			out = append(out, htmlURLs(v)...)
		}
	}
	return out
}

// The commands the console and the page give to act as alice reach this demo: with the page
// elsewhere than DefaultURL (`alfred demo --forge-listen`, as the README suggests when 8082 is
// taken) they carry its --url, else `alfred demo answer` would post to another address.
func TestTheCommandsGivenReachThisDemo(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f, err := New(Config{Dir: t.TempDir(), URL: srv.URL, NoWebhook: true, PagesURL: "http://127.0.0.1:1/ui/", Out: &out})
	require.NoError(t, err)
	mux.Handle("/", f.Handler())
	require.NoError(t, f.Open(context.Background()))
	issue := f.filed()

	f.fj.SetIssueLabels(issue, Bot, "status::waiting_validation")
	_, _, page := get(t, srv.URL+"/")
	require.Contains(t, page, "<code>./bin/alfred demo validate --url "+srv.URL+"</code>", "the page's command")
	f.tell(f.Status())
	require.Contains(t, out.String(), "or with: ./bin/alfred demo validate --url "+srv.URL+"\n", "the console's")

	f.fj.SetIssueLabels(issue, Bot, "status::waiting_info")
	f.fj.AddComment(issue, Bot, "### q1. Which separator?")
	_, _, page = get(t, srv.URL+"/")
	require.Contains(t, page, "<code>./bin/alfred demo answer --url "+srv.URL+" q1 b</code>")
	f.tell(f.Status())
	require.Contains(t, out.String(), "or with: ./bin/alfred demo answer --url "+srv.URL+" q1 b\n")

	at := &Forge{cfg: Config{URL: DefaultURL + "/"}}
	require.Equal(t, "./bin/alfred demo answer q1 b", at.Command("answer", "q1", "b"), "at the default address, no --url")
}
