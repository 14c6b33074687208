package web_test

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// questionBlock is a question comment as the machine posts it: a hidden marker, a heading, a
// task list and bold text.
const questionBlock = "<!-- alfred:key=questions-1:kind=questions -->\n" +
	"I have one question before I go on.\n\n### q1. Which separator?\n\n" +
	"- [x] **a. Comma** _(default)_ — RFC 4180\n- [ ] **b. Semicolon** — Excel in Europe\n\n" +
	"Reply `q1: b`, or tick a box. <script>alert(1)</script>"

// shadowBundle serves a mailbox whose project is in shadow mode, with the writes it would
// have made.
func shadowBundle(t *testing.T) string {
	t.Helper()
	mem := webtest.NewMemory()
	mem.AddMailbox(web.MailboxDetail{
		MailboxSummary: web.MailboxSummary{ID: 3, Forge: "gl", Repo: "acme/shop", Number: 4, Title: "Export as CSV",
			State: "in_development", LastEventAt: t0, ShadowWrites: 5},
		Shadow: []web.ShadowPost{
			{ID: 1, At: t0, Kind: "comment", CommentID: -1, Body: "<!-- alfred:key=ack:kind=ack -->\nThanks @alice, I am on it."},
			{ID: 2, At: t0, Kind: "labels", Add: []string{"status::waiting_info"}},
			{ID: 3, At: t0.Add(time.Second), Kind: "comment", CommentID: -3, Body: questionBlock},
			{ID: 4, At: t0.Add(time.Hour), Kind: "issue_body", Body: "We need a CSV export.\n\n" +
				"| Question | Decision | By |\n|---|---|---|\n| q1. Which separator? | b. Semicolon | @alice |"},
			{ID: 5, At: t0.Add(2 * time.Hour), Kind: "run", Body: "The development run would start now.",
				Detail: map[string]string{"phase": "development", "state": "in_development"}},
		},
	})
	h, err := web.New(web.Config{Reader: mem, Now: func() time.Time { return t0 }, Redact: func(s string) string { return s }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + web.Prefix + "/mailboxes/3"
}

var shadowSection = regexp.MustCompile(`(?s)<h2>Shadow mode.*?</ol>`)

func TestShadowPostsRenderAsTheForgeShowsThem(t *testing.T) {
	t.Parallel()
	code, body := get(t, shadowBundle(t))
	require.Equal(t, http.StatusOK, code)
	section := shadowSection.FindString(body)
	require.NotEmpty(t, section, "the page has a shadow section")
	require.Contains(t, section, "<h3>q1. Which separator?</h3>", "Markdown is rendered")
	require.Contains(t, section, `<input checked="" disabled="" type="checkbox"> <strong>a. Comma</strong>`, "a task list, as the forges show it")
	require.Contains(t, section, "<td>b. Semicolon</td>", "a table")
	require.NotContains(t, section, "<script>", "raw HTML is not passed through")
	require.NotContains(t, section, "alfred:key=", "the hidden markers stay hidden")
	require.Contains(t, body, `<a href="#shadow">5 writes not made</a>`)
	require.Contains(t, section, "would add the labels status::waiting_info")
	require.Contains(t, section, "would start the development run; shadow mode starts no run that pushes")
	// In order: the acknowledgement, the label, the questions, the description, the run.
	require.Less(t, strings.Index(section, "I am on it"), strings.Index(section, "status::waiting_info"))
	require.Less(t, strings.Index(section, "status::waiting_info"), strings.Index(section, "Which separator"))
	require.Less(t, strings.Index(section, "Which separator"), strings.Index(section, "would start the development run"))

	golden := filepath.Join("testdata", "shadow-section.html")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(section+"\n"), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), section+"\n")
}

func TestShadowSectionInChromium(t *testing.T) {
	t.Parallel()
	br := webtest.NewBrowser(t)
	p := br.Load(t, shadowBundle(t), "web-mailbox-shadow")
	require.Contains(t, p.DOM, `id="shadow"`)
	require.Contains(t, p.DOM, "Which separator?")
	require.NotContains(t, p.DOM, "alert(1)</script>")
}

func TestMailboxWithoutShadowHasNoSection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, body := get(t, b.srv.URL+web.Prefix+"/mailboxes/2")
	require.NotContains(t, body, "Shadow mode")
}
