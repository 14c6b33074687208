package demo

import (
	"errors"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/alfred-bot/alfred/internal/base/markdown"
)

// pageHandler serves the demo's page: GET / shows the issue as the forge holds it (labels,
// comments and pull requests, their text rendered as a forge renders Markdown) with what to do
// next, and the forge's web addresses of the repository, the issue, its pull requests and the
// accounts (those Alfred's pages link to) redirect to it (303); POST /answer (form field "text") and
// POST /validate act as alice. A browser's form gets a redirect to the page; any other client
// (alfred demo answer/validate) gets a line of plain text: 200 done, 409 not waiting for it,
// 502 Alfred did not take the delivery. A POST from a page of another origin is refused (403),
// so another site cannot act as alice.
func (f *Forge) pageHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", f.servePage)
	// The forge's web addresses Alfred links to (the issue, its pull requests, their comments,
	// the repository, the accounts) all show this one page.
	toPage := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusSeeOther) }
	for _, p := range []string{"/" + Human, "/" + Human + "/{rest...}", "/" + Bot} {
		mux.HandleFunc("GET "+p, toPage)
	}
	mux.HandleFunc("POST /answer", func(w http.ResponseWriter, r *http.Request) {
		f.act(w, r, func() error { return f.Answer(r.Context(), r.PostFormValue("text")) })
	})
	mux.HandleFunc("POST /validate", func(w http.ResponseWriter, r *http.Request) {
		f.act(w, r, func() error { return f.Validate(r.Context()) })
	})
	return mux
}

// act runs do for a POST and answers as pageHandler says.
func (f *Forge) act(w http.ResponseWriter, r *http.Request, do func() error) {
	if o := r.Header.Get("Origin"); o != "" && o != origin(f.cfg.URL) {
		http.Error(w, "a form of another site may not act here", http.StatusForbidden)
		return
	}
	err := do()
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		to := "/"
		if err != nil {
			to += "?error=" + url.QueryEscape(err.Error())
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case err == nil:
		_, _ = io.WriteString(w, "ok\n")
	case errors.Is(err, ErrNotWaiting):
		http.Error(w, err.Error(), http.StatusConflict)
	default:
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
}

// origin is the scheme and host of u, as a browser sends it in Origin.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Scheme + "://" + p.Host
}

func (f *Forge) servePage(w http.ResponseWriter, r *http.Request) {
	st := f.Status()
	data := struct {
		Status     Status
		Repo       string
		Issue      int64
		Title      string
		Error      string
		Pages      string
		Login      string
		Token      string
		Waiting    bool
		Validate   bool
		Working    bool
		Repository string
		// Answer and ValidateCmd are the commands that act as alice on this demo.
		Answer, ValidateCmd string
	}{Answer: f.Command("answer", "q1", "b"), ValidateCmd: f.Command("validate"), Status: st, Repo: Repo, Issue: f.filed().Number, Title: issueTitle,
		Error: r.URL.Query().Get("error"), Pages: f.cfg.PagesURL,
		Login: strings.TrimSuffix(f.cfg.PagesURL, "/") + "/login", Token: f.cfg.AdminToken,
		Waiting: st.Label == "status::waiting_info", Validate: st.Label == "status::waiting_validation",
		Repository: f.bare}
	data.Working = !data.Waiting && !data.Validate && !(st.Label == "status::done" && st.Merged != 0)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = pageTemplate.Execute(w, data)
}

var pageTemplate = template.Must(template.New("demo").Funcs(template.FuncMap{"markdown": markdown.HTML}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Alfred demo · {{.Repo}}#{{.Issue}}</title>
{{if .Working}}<meta http-equiv="refresh" content="2">{{end}}
<style>body{font:15px system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em}
pre{white-space:pre-wrap;background:#f6f8fa;padding:.8em;border-radius:6px}
.text{border:1px solid #d0d7de;border-radius:6px;padding:0 .8em}table{border-collapse:collapse}
td,th{border:1px solid #d0d7de;padding:.2em .5em}
.label{display:inline-block;background:#e7f0ff;border-radius:1em;padding:0 .6em;margin-right:.3em}
.next{background:#fff8db;padding:.8em;border-radius:6px}.error{color:#c92a2a}</style></head>
<body>
<p>Alfred's demo: this page stands in for a Forgejo; you are <b>alice</b>. The bot works in
<a href="{{.Pages}}">Alfred's pages</a> (live runs and logs):
<form method="post" action="{{.Login}}" style="display:inline"><input type="hidden" name="token" value="{{.Token}}">
<input type="hidden" name="next" value="/ui/"><button>open Alfred's pages</button></form></p>
{{if .Error}}<p class="error">{{.Error}}</p>{{end}}
{{if not .Issue}}<p class="next">Alfred is starting; the issue is filed once it answers its webhooks.</p>
{{else}}
<h1>{{.Title}} <small>{{.Repo}}#{{.Issue}}</small></h1>
<p>{{range .Status.Labels}}<span class="label">{{.}}</span>{{end}} assigned: {{range .Status.Assignees}}{{.}} {{end}}</p>
<div class="next">
{{if .Waiting}}Alfred asks a question below, and assigned alice: her turn until she answers. Answer it as <code>q1: b</code> (or leave the default):
<form method="post" action="/answer"><input name="text" value="q1: b" size="30"> <button>comment as alice</button></form>
or run <code>{{.Answer}}</code>.
{{else if .Validate}}Alfred posted its plan below. Validate it (adds the label <code>ai::validate_plan</code>):
<form method="post" action="/validate"><button>validate the plan</button></form>
or run <code>{{.ValidateCmd}}</code>.
{{else if .Status.Merged}}Done: pull request #{{.Status.Merged}} was merged by Alfred once CI passed.
The branch is in <code>{{.Repository}}</code>.
{{else}}Alfred is working ({{or .Status.Label "starting"}}); this page refreshes itself.{{end}}
</div>
<h2>alice opened it</h2><div class="text">{{markdown .Status.Body}}</div>
{{range .Status.Comments}}<h2>{{.Author.Login}}</h2><div class="text">{{markdown .Body}}</div>{{end}}
{{range .Status.PullRequests}}<h2>pull request #{{.Number}}: {{.Title}} ({{.State}})</h2>
<p>{{.SourceBranch}} → {{.TargetBranch}} at {{.HeadSHA}}</p><div class="text">{{markdown .Body}}</div>{{end}}
{{end}}
</body></html>`))
