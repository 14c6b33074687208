// Package demo is the forge side of `alfred demo` (what `make run` starts when no forge is
// configured): the Forgejo stand-in of the tests (webhook/forgetest) run in the process, with
// one repository whose git data is a bare repository on disk, one issue assigned to the bot,
// the webhooks a Forgejo would send for it (signed as Forgejo signs them), a CI that passes on
// every head of a pull request, and a small page where the newcomer plays the human: answer
// Alfred's question, validate its plan. Nothing leaves the machine. With Config.NoWebhook the
// repository has no webhook and no delivery is sent: Alfred polls the stand-in
// (transport: poll, spec/transport.md).
//
// cmd/alfred wires it to a real Alfred (the embedded store, the script agent in Docker) and
// serves Handler; the page links to Alfred's own pages (/ui).
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// The demo's names: the human who files the issue and answers, the repository and the bot.
const (
	Human = "alice"
	Repo  = "alice/sandbox"
	Bot   = forgetest.BotLogin
)

// The issue the demo files. It carries type::task, so that Alfred goes straight to its
// functional analysis (the script's question) instead of asking the type of work first.
const (
	issueTitle = "Export the report as CSV"
	issueBody  = "The monthly report should be downloadable as a CSV file that opens in a spreadsheet."
	typeLabel  = "type::task"
)

// DefaultURL is where `alfred demo` serves the stand-in and its page unless told otherwise
// (--forge-listen), and what `alfred demo answer` and `alfred demo validate` post to without
// --url.
const DefaultURL = "http://127.0.0.1:8082"

// Config is what a Forge needs from the wiring.
type Config struct {
	// Dir holds the repository's bare git repository (Dir/sandbox.git); it must exist.
	Dir string
	// URL is where the caller serves Handler: the forge's base_url and the demo's page.
	URL string
	// HookURL and HookSecret: where deliveries go (Alfred's /webhooks/forgejo) and the
	// secret they are signed with.
	HookURL, HookSecret string
	// PagesURL is Alfred's operator pages ("http://127.0.0.1:8081/ui/"); AdminToken signs in
	// to them (the page's button), a throwaway token of this demo.
	PagesURL, AdminToken string
	// Out receives the story, a line per step (nil: discarded).
	Out io.Writer
	// Poll is how often Run looks at the forge's state (0: 500 ms).
	Poll time.Duration
	// NoWebhook makes a forge without a webhook, as one Alfred polls (transport: poll): New
	// adds no hook to the repository and Open, Answer and Validate send no delivery (HookURL
	// and HookSecret are not used).
	NoWebhook bool
}

// Forge is the demo's forge: the stand-in, its repository and issue, and the human's side.
type Forge struct {
	cfg   Config
	fj    *forgetest.ForgejoServer
	bare  string
	issue forge.IssueRef
	hc    *http.Client
	page  http.Handler

	mu     sync.Mutex
	opened bool
	ci     map[string]bool // heads of pull requests CI has passed on
	told   map[string]bool // steps already told
	sent   int             // deliveries sent to HookURL
}

// New creates the stand-in (not yet serving: see Handler), the bare repository with one
// commit on main, the accounts (alice, who owns the repository, and the bot, its admin
// collaborator) and the repository's webhook to HookURL (none with NoWebhook).
func New(cfg Config) (*Forge, error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	bare := filepath.Join(cfg.Dir, "sandbox.git")
	if err := seedRepository(bare, filepath.Join(cfg.Dir, "seed")); err != nil {
		return nil, err
	}
	fj := forgetest.NewForgejoHandler(cfg.URL)
	fj.SetClock(time.Now().UTC().Truncate(time.Second))
	fj.AddUser(Human)
	fj.AddRepo(Repo, "main", bare)
	fj.SetAccessLevel(Repo, Bot, 40) // admin: Forgejo shows hooks and permissions to admins only
	if !cfg.NoWebhook {
		fj.AddHook(Repo, forge.Hook{URL: cfg.HookURL, ContentType: "json", Active: true,
			Events: doctor.ForgejoEvents})
	}
	f := &Forge{cfg: cfg, fj: fj, bare: bare, hc: &http.Client{Timeout: 30 * time.Second},
		ci: map[string]bool{}, told: map[string]bool{}}
	f.page = f.pageHandler()
	return f, nil
}

// Token is the bot's API token on the stand-in (the forge's token_file).
func (f *Forge) Token() string { return f.fj.Token }

// Repository is the path of the bare git repository the stand-in serves.
func (f *Forge) Repository() string { return f.bare }

// Handler serves the stand-in's API under /api/v1 and the demo's page at /.
func (f *Forge) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			f.fj.ServeHTTP(w, r)
			return
		}
		f.page.ServeHTTP(w, r)
	})
}

// Open files the issue as alice, with the bot assigned, and delivers the assignment (with
// NoWebhook, Alfred's next poll finds it). Call it once Alfred answers its webhooks.
func (f *Forge) Open(ctx context.Context) error {
	f.mu.Lock()
	if f.opened {
		f.mu.Unlock()
		return errors.New("demo: the issue is filed already")
	}
	f.opened = true
	f.mu.Unlock()
	n := f.fj.AddIssue(Repo, forgetest.SeedIssue{Title: issueTitle, Body: issueBody, Author: Human,
		Labels: []string{typeLabel}})
	issue := forge.IssueRef{Forge: string(forge.KindForgejo), Repo: Repo, Number: n}
	// Assigned by alice, as her timeline records it: a poll attributes the assignment by it.
	f.fj.SetIssueAssignees(issue, Human, Bot)
	f.mu.Lock()
	f.issue = issue
	f.mu.Unlock()
	f.say("%s filed issue %s#%d %q and assigned it to %s", Human, Repo, n, issueTitle, Bot)
	return f.deliver(ctx, "issue_assign", f.fj.IssueHook(issue, "assigned", Human))
}

// ErrNotWaiting is returned by Answer and Validate when the issue does not wait for that.
var ErrNotWaiting = errors.New("the issue does not wait for that now")

// Answer posts text as alice's comment on the issue ("q1: b") and delivers it. It is
// ErrNotWaiting unless Alfred waits for an answer (status::waiting_info).
func (f *Forge) Answer(ctx context.Context, text string) error {
	if s := f.Status(); s.Label != "status::waiting_info" {
		return fmt.Errorf("%w: Alfred asks nothing (the issue is %s)", ErrNotWaiting, s.Label)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return errors.New("an empty answer: write it as Alfred asks, e.g. q1: b")
	}
	id := f.fj.AddComment(f.filed(), Human, text)
	f.say("%s answered: %s", Human, text)
	return f.deliver(ctx, "issue_comment", f.fj.CommentHook(Repo, id, "created"))
}

// Validate adds ai::validate_plan to the issue as alice and delivers the label change. It is
// ErrNotWaiting unless the plan waits for its validation (status::waiting_validation).
func (f *Forge) Validate(ctx context.Context) error {
	if s := f.Status(); s.Label != "status::waiting_validation" {
		return fmt.Errorf("%w: no plan waits for validation (the issue is %s)", ErrNotWaiting, s.Label)
	}
	issue := f.filed()
	// Added by alice, as her timeline records it: a poll attributes the label change by it.
	f.fj.SetIssueLabels(issue, Human, append(f.fj.IssueLabels(issue), "ai::validate_plan")...)
	f.say("%s validated the plan (label ai::validate_plan)", Human)
	return f.deliver(ctx, "issue_label", f.fj.IssueHook(issue, "label_updated", Human))
}

// Deliveries is the number of deliveries sent to HookURL so far (always 0 with NoWebhook).
func (f *Forge) Deliveries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

// deliver POSTs a delivery to Alfred as Forgejo sends it, signed, with a new delivery id. With
// NoWebhook it sends nothing: the change waits on the stand-in for Alfred's next poll.
func (f *Forge) deliver(ctx context.Context, eventType string, body []byte) error {
	if f.cfg.NoWebhook {
		return nil
	}
	f.mu.Lock()
	f.sent++
	f.mu.Unlock()
	req := forgetest.NewForgejoRequest(f.cfg.HookURL, eventType, newID(), f.cfg.HookSecret, body).WithContext(ctx)
	resp, err := f.hc.Do(req)
	if err != nil {
		return fmt.Errorf("deliver %s to %s: %w", eventType, f.cfg.HookURL, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("deliver %s to %s: %s %s", eventType, f.cfg.HookURL, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Status is where the issue stands on the forge.
type Status struct {
	// Label is the issue's status:: label ("" before Alfred's first step).
	Label string
	// Body is the issue's description (Alfred adds its decisions to it).
	Body string
	// Labels and Assignees are the issue's, Comments its comments in order.
	Labels, Assignees []string
	Comments          []forge.Comment
	// PullRequests are the repository's pull requests.
	PullRequests []forge.MergeRequest
	// Merged is the pull request merged (0: none yet).
	Merged int64
}

// Status reads the issue's state from the stand-in; before Open it is empty.
func (f *Forge) Status() Status {
	issue := f.filed()
	if issue.Number == 0 {
		return Status{}
	}
	st := Status{Body: f.fj.IssueBody(issue), Labels: f.fj.IssueLabels(issue), Assignees: f.fj.IssueAssignees(issue),
		Comments: f.fj.IssueComments(issue), PullRequests: f.fj.MergeRequests(Repo)}
	for _, l := range st.Labels {
		if strings.HasPrefix(l, "status::") {
			st.Label = l
		}
	}
	for _, mr := range st.PullRequests {
		if mr.Merged || mr.State == "merged" {
			st.Merged = mr.Number
		}
	}
	return st
}

// filed is the issue Open filed (Number 0 before).
func (f *Forge) filed() forge.IssueRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issue
}

// Run plays the forge's own part until ctx ends: the CI passes on each new head of an open
// pull request (the forge sees the push: the head is read from the bare repository), and
// each step of the issue is told on Out with what the newcomer can do next.
func (f *Forge) Run(ctx context.Context) {
	t := time.NewTicker(f.cfg.Poll)
	defer t.Stop()
	for {
		f.step()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step runs the CI on new heads and tells what changed.
func (f *Forge) step() {
	st := f.Status()
	for _, mr := range st.PullRequests {
		if mr.State != "open" {
			continue
		}
		head, err := gitOut(f.bare, "rev-parse", "--verify", "-q", "refs/heads/"+mr.SourceBranch)
		if err != nil || head == "" || f.ciDone(head) {
			continue
		}
		f.fj.SetBranch(Repo, mr.SourceBranch, head)
		f.fj.SetCI(Repo, head, forgetest.CIJob{Name: "demo/ci", State: forge.CISuccess})
		f.tellOnce("ci-"+head, "the forge's CI passed on %s of pull request #%d (the demo's CI passes every head)", head[:8], mr.Number)
	}
	f.tell(st)
}

func (f *Forge) ciDone(head string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	done := f.ci[head]
	f.ci[head] = true
	return done
}

// Command is the command line that acts as alice on this demo (verb "answer" or "validate",
// then its arguments): `./bin/alfred demo <verb> …`, with --url when the page is not at
// DefaultURL, so that the command reaches this demo and no other.
func (f *Forge) Command(verb string, args ...string) string {
	cmd := []string{"./bin/alfred", "demo", verb}
	if u := strings.TrimSuffix(f.cfg.URL, "/"); u != DefaultURL {
		cmd = append(cmd, "--url", u)
	}
	return strings.Join(append(cmd, args...), " ")
}

// tell says each step once, with what to do next.
func (f *Forge) tell(st Status) {
	page := strings.TrimSuffix(f.cfg.URL, "/") + "/"
	switch st.Label {
	case "status::waiting_info":
		if slices.ContainsFunc(st.Comments, func(c forge.Comment) bool { return strings.Contains(c.Body, "### q1.") }) {
			f.tellOnce(st.Label, "Alfred asks a question (status::waiting_info) and assigns alice: her turn until she answers. Answer it on %s or with: %s", page, f.Command("answer", "q1", "b"))
		}
	case "status::waiting_validation":
		f.tellOnce(st.Label, "Alfred posted its plan (status::waiting_validation). Validate it on %s or with: %s", page, f.Command("validate"))
	case "":
	case "status::done":
		if st.Merged != 0 {
			f.tellOnce(st.Label, "done: Alfred merged pull request #%d (auto-merge on green CI) and the issue is status::done. See %s; Ctrl-C ends the demo", st.Merged, f.cfg.PagesURL)
		}
	default:
		f.tellOnce(st.Label, "the issue is %s", st.Label)
	}
}

func (f *Forge) tellOnce(key, format string, args ...any) {
	f.mu.Lock()
	seen := f.told[key]
	f.told[key] = true
	f.mu.Unlock()
	if !seen {
		f.say(format, args...)
	}
}

func (f *Forge) say(format string, args ...any) {
	fmt.Fprintf(f.cfg.Out, "demo: "+format+"\n", args...)
}

// seedRepository creates the bare repository bare with one commit on main, made in work.
func seedRepository(bare, work string) error {
	if err := os.MkdirAll(work, 0o750); err != nil {
		return err
	}
	readme := "# sandbox\n\nThe repository of Alfred's demo.\n"
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte(readme), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", bare},
		{"init", "-q", "-b", "main", work},
		{"-C", work, "add", "README.md"},
		{"-C", work, "-c", "user.name=alice", "-c", "user.email=alice@example.org", "commit", "-q", "-m", "Initial commit"},
		{"-C", work, "push", "-q", bare, "main"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return os.RemoveAll(work)
}

func gitOut(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
