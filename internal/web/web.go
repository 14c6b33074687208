// Package web is Alfred's operator page, served by "alfred serve" under Prefix: the list of
// mailboxes, one mailbox (timeline, runs and their sessions), one run (its container log, live
// while it runs) and the settings in force for a project. Pages are server-rendered
// html/template with embedded assets and no script: a running run's page refreshes itself.
// The page reads through Reader, LiveLogs and Settings. With Controls its forms pause and
// resume a mailbox or a project, cancel a run and drain the instance: POST requests that carry
// a per-browser CSRF token (an HMAC of a random cookie under CSRFKey, checked in constant time)
// and come from the pages' own origin. Authentication is the caller's: mount the handler
// behind a token check.
package web

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/internal/base/cost"
	"github.com/alfred-bot/alfred/internal/base/markdown"
)

// Prefix is where cmd mounts the pages.
const Prefix = "/ui"

// DefaultLogBytes is how much of a running container's log a run page shows.
const DefaultLogBytes = 256 << 10

//go:embed templates/*.html assets/*
var files embed.FS

// Config configures New.
type Config struct {
	// Reader reads mailboxes and runs; required.
	Reader Reader
	// Logs reads running containers' logs; nil shows stored output only.
	Logs LiveLogs
	// Settings answers the effective settings; nil hides the settings page.
	Settings Settings
	// Redact censors every secret in a text; it is applied to every log shown and to every page
	// as rendered, so that no stored text it shows (a run's outcome, the timeline, an error's
	// words) shows a secret. Required.
	Redact func(string) string
	// Now is the clock for durations; nil means time.Now.
	Now func() time.Time
	// Refresh is how often a running run's page reloads; 0 means 2 s.
	Refresh time.Duration
	// Limit is how many mailboxes one page of the list shows (?page=N, from 1); 0 means 100.
	Limit int
	// Logger logs read failures; nil discards them.
	Logger *slog.Logger
	// Controls carries out the forms (pause, resume, cancel, drain); nil shows no form and
	// answers every POST 404.
	Controls Controls
	// CSRFKey signs the forms' CSRF tokens; required with Controls, the same on every replica
	// (cmd derives it from the admin token).
	CSRFKey []byte
	// Actor names who sent a request for the timeline; nil (or "") means "operator (session
	// <id>) from <client address>".
	Actor func(*http.Request) string
	// IssueURL links an issue (or merge request) on its forge when the Reader gives no link;
	// nil or "" shows no link.
	IssueURL func(forgeName, repo string, number int64, mergeRequest bool) string
	// PullRequests reports whether the forge of that name calls a merge request a pull request
	// and numbers it with "#" (Forgejo, Gitea); nil or false: "merge request" and "!" (GitLab).
	PullRequests func(forgeName string) bool
	// Backlog reads the backlog of event processing: how many stored events wait to be
	// applied, and how long the first of them has waited. Every page's header shows it; nil
	// shows nothing, a read error is logged and shows nothing.
	Backlog func(ctx context.Context) (events int, oldest time.Duration, err error)
}

// Handler serves the pages; build it with New.
type Handler struct {
	cfg   Config
	pages map[string]*template.Template
	mux   http.Handler
}

// New checks cfg and parses the templates.
func New(cfg Config) (*Handler, error) {
	if cfg.Reader == nil {
		return nil, errors.New("web: Reader is required")
	}
	if cfg.Redact == nil {
		return nil, errors.New("web: Redact is required")
	}
	if cfg.Controls != nil && len(cfg.CSRFKey) < 16 {
		return nil, errors.New("web: CSRFKey (16 bytes or more) is required with Controls")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Refresh = cmp.Or(cfg.Refresh, 2*time.Second)
	cfg.Limit = cmp.Or(cfg.Limit, 100)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, pages: map[string]*template.Template{}}
	funcs := template.FuncMap{
		"prefix":      func() string { return Prefix },
		"ago":         func(t time.Time) string { return ago(cfg.Now(), t) },
		"utc":         func(t time.Time) string { return utc(t) },
		"maxTimeline": func() int { return MaxTimelineEvents },
		"duration":    func(r RunSummary) string { return r.Duration(cfg.Now()).String() },
		"cost":        Cost,
		"tokens":      Tokens,
		"markdown":    markdown.HTML, // as the forges render a comment
		"mr": func(forgeName string, number int64) string {
			return MergeRequestRef(cfg.PullRequests != nil && cfg.PullRequests(forgeName), number)
		},
		"mrsigil": func(forgeName string) string {
			if cfg.PullRequests != nil && cfg.PullRequests(forgeName) {
				return "#"
			}
			return "!"
		},
	}
	for _, page := range []string{"mailboxes", "mailbox", "run", "settings"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("web: parse %s: %w", page, err)
		}
		h.pages[page] = t
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Get("/", h.mailboxes)
	r.Get("/mailboxes/{id}", h.mailbox)
	r.Get("/runs/{id}", h.run)
	r.Get("/runs/{id}/log", h.runLog)
	r.Get("/settings", h.settings)
	h.routeControls(r)
	r.Handle("/assets/*", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	h.mux = http.StripPrefix(Prefix, r)
	return h, nil
}

// ServeHTTP serves the pages under Prefix. Every answer (a page, an asset, a log, a 404) may
// not be framed by any site (frame-ancestors 'none', X-Frame-Options DENY: no clickjacking of
// the operator's session), is not sniffed as another type, and is not cached; its forms post
// to the pages only (form-action 'self').
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'none'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

type pageData struct {
	Title    string
	Refresh  int // seconds; 0 for no refresh
	Draining bool
	Body     any
	// Backlog is the header's figure of events waiting to be applied; "" for none.
	Backlog string
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, page, title string, refresh int, body any) {
	draining := h.cfg.Controls != nil && h.cfg.Controls.Draining()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	data := pageData{Title: title, Refresh: refresh, Draining: draining, Body: body, Backlog: h.backlog(r.Context())}
	// The page is rendered whole, then censored whole: every stored text it shows (a run's
	// outcome, the timeline, a title, an error's words), not only the logs, passes Redact.
	var out bytes.Buffer
	if err := h.pages[page].Execute(&out, data); err != nil {
		h.cfg.Logger.WarnContext(r.Context(), "web: render page", "page", page, "err", err)
	}
	_, _ = io.WriteString(w, h.cfg.Redact(out.String()))
}

// backlog renders Config.Backlog for the header: "events waiting: 0", or "events waiting:
// 1,203, the oldest for 12s".
func (h *Handler) backlog(ctx context.Context) string {
	if h.cfg.Backlog == nil {
		return ""
	}
	n, oldest, err := h.cfg.Backlog(ctx)
	if err != nil {
		h.cfg.Logger.WarnContext(ctx, "web: read the event backlog", "err", err)
		return ""
	}
	if n == 0 {
		return "events waiting: 0"
	}
	return fmt.Sprintf("events waiting: %s, the oldest for %s", thousands(n), oldest.Round(time.Second))
}

// thousands writes n with a comma between each group of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrNotFound) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h.cfg.Logger.WarnContext(r.Context(), "web: read", "path", r.URL.Path, "err", err)
	http.Error(w, "cannot read the store", http.StatusServiceUnavailable)
}

// pageOf reads ?page= (1 when absent); anything but a positive number is an error.
func pageOf(r *http.Request) (int, error) {
	v := r.URL.Query().Get("page")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1<<20 {
		return 0, fmt.Errorf("page %q: not a positive number", v)
	}
	return n, nil
}

// Paging is the position of one page of a list: its number, the first and last row shown (from
// 1), and the numbers of the pages before and after it (0 when there is none).
type Paging struct {
	Page, First, Last, Prev, Next int
}

func (h *Handler) mailboxes(w http.ResponseWriter, r *http.Request) {
	page, err := pageOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	size := h.cfg.Limit
	// One row more than the page tells whether a next page exists.
	list, err := h.cfg.Reader.Mailboxes(r.Context(), (page-1)*size, size+1)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var body struct {
		Mailboxes        []MailboxSummary
		Open, Running    int
		Queued           int
		CostUSD          float64
		Unrated          int
		SettingsLinkable bool
		Paging           Paging
		Forms            formData
	}
	body.Forms = h.forms(w, r)
	h.installation(r, &body.Forms)
	body.Paging = Paging{Page: page, First: (page-1)*size + 1}
	if len(list) > size {
		list, body.Paging.Next = list[:size], page+1
	}
	if page > 1 {
		body.Paging.Prev = page - 1
	}
	body.Paging.Last = body.Paging.First + len(list) - 1
	body.Mailboxes, body.SettingsLinkable = list, h.cfg.Settings != nil
	for i := range list {
		h.link(&list[i])
	}
	for _, m := range list {
		if !m.Closed {
			body.Open++
		}
		if m.Running {
			body.Running++
		}
		if m.Queued {
			body.Queued++
		}
		body.CostUSD += m.CostUSD
		body.Unrated += m.Unrated
	}
	h.render(w, r, "mailboxes", "Mailboxes", 0, body)
}

// link fills m.IssueURL from Config.IssueURL when the reader gave none.
func (h *Handler) link(m *MailboxSummary) {
	if m.IssueURL == "" && h.cfg.IssueURL != nil {
		m.IssueURL = h.cfg.IssueURL(m.Forge, m.Repo, m.Number, m.MergeRequest)
	}
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("id %q: %w", chi.URLParam(r, "id"), ErrNotFound)
	}
	return id, nil
}

func (h *Handler) mailbox(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		var mb *MailboxDetail
		if mb, err = h.cfg.Reader.Mailbox(r.Context(), id); err == nil {
			h.link(&mb.MailboxSummary)
			refresh := 0
			if mb.Running {
				refresh = int(h.cfg.Refresh.Seconds())
			}
			body := struct {
				*MailboxDetail
				Forms formData
			}{mb, h.forms(w, r)}
			h.render(w, r, "mailbox", fmt.Sprintf("%s#%d", mb.Repo, mb.Number), refresh, body)
			return
		}
	}
	h.fail(w, r, err)
}

// runBody is what the run page shows.
type runBody struct {
	*RunDetail
	Log  string
	Live bool
	// LogNote says where the log comes from or why it is missing.
	LogNote string
	Forms   formData
}

func (h *Handler) runView(ctx context.Context, id int64) (*runBody, error) {
	run, err := h.cfg.Reader.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	b := &runBody{RunDetail: run, Log: run.Output, LogNote: "stored output of the finished run"}
	if run.Running() {
		b.Live, b.LogNote = true, "live container log"
		switch {
		case h.cfg.Logs == nil || run.Container == "":
			b.LogNote = "the run is starting: no container log yet"
		default:
			// The window asked for holds censor.Margin bytes more than is shown: the start of a
			// cut log may be the end of a secret the censor cannot recognise in part, so the
			// window is censored whole and its first censor.Margin bytes are dropped after.
			live, err := h.cfg.Logs.RunLog(ctx, run.Container, DefaultLogBytes+censor.Margin)
			if err != nil {
				b.LogNote = "container log unavailable: " + errorWords(err)
				break
			}
			b.Log = h.cfg.Redact(live)
			if len(live) >= DefaultLogBytes+censor.Margin {
				cut := min(censor.Margin, len(b.Log))
				for cut < len(b.Log) && !utf8.RuneStart(b.Log[cut]) {
					cut++
				}
				b.Log = b.Log[cut:]
			}
			return b, nil
		}
	}
	b.Log = h.cfg.Redact(b.Log)
	return b, nil
}

// errorWords keeps an error's text short for a page (the log has the detail).
func errorWords(err error) string {
	if errors.Is(err, ErrNotFound) {
		return "the container is gone"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		var b *runBody
		if b, err = h.runView(r.Context(), id); err == nil {
			refresh := 0
			if b.Live {
				refresh = int(h.cfg.Refresh.Seconds())
			}
			b.Forms = h.forms(w, r)
			h.render(w, r, "run", fmt.Sprintf("run %d: %s", b.ID, b.Phase), refresh, b)
			return
		}
	}
	h.fail(w, r, err)
}

// runLog serves the censored log as plain text, for curl and for following a run, its
// terminal controls shown (terminalSafe).
func (h *Handler) runLog(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		var b *runBody
		if b, err = h.runView(r.Context(), id); err == nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, terminalSafe(b.Log))
			return
		}
	}
	h.fail(w, r, err)
}

// terminalSafe returns a run's log with every character a terminal would act on shown instead:
// a C0 control but the line feed and the tab (ESC starts the sequences that write the
// clipboard, set the window's title, clear the screen or hide text; a carriage return not
// before a line feed overwrites the line) as its Control Pictures sign (ESC "␛", CR "␍"), DEL
// "␡", a C1 control and a bidirectional override or isolate as "<U+XXXX>". The run writes its
// log, and an operator reads it in a terminal (curl).
func terminalSafe(s string) string {
	if !strings.ContainsFunc(s, terminalControl) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch {
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			b.WriteRune(r)
		case !terminalControl(r):
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune(0x2421)
		default:
			fmt.Fprintf(&b, "<U+%04X>", r)
		}
	}
	return b.String()
}

// terminalControl reports a character terminalSafe shows instead of writing it.
func terminalControl(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r): // C0, DEL and C1
		return true
	case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return true
	}
	return false
}

func (h *Handler) settings(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Settings == nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	project := strings.Trim(strings.TrimSpace(r.URL.Query().Get("project")), "/")
	list, err := h.cfg.Settings.Effective(project)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body := struct {
		Project  string
		Settings []Setting
		Projects []string
	}{project, list, h.cfg.Settings.Projects()}
	title := "Settings (global)"
	if project != "" {
		title = "Settings for " + project
	}
	h.render(w, r, "settings", title, 0, body)
}

// Cost formats a sum of costs in US dollars with the runs it leaves out because their cost
// is unknown (unrated), as cost.Words does everywhere Alfred shows a cost.
func Cost(usd float64, unrated int) string { return cost.Words(usd, unrated) }

// Tokens formats input and output tokens ("1.2k in / 340 out").
func Tokens(in, out int64) string { return short(in) + " in / " + short(out) + " out" }

func short(n int64) string {
	switch {
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 10_000:
		return strconv.FormatInt(n/1000, 10) + "k"
	case n >= 1000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}

func utc(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// MergeRequestRef names merge request number as its forge's users do: "pull request #2" on a
// forge with pull requests (Forgejo, Gitea), "merge request !2" on GitLab.
func MergeRequestRef(pullRequests bool, number int64) string {
	if pullRequests {
		return fmt.Sprintf("pull request #%d", number)
	}
	return fmt.Sprintf("merge request !%d", number)
}
