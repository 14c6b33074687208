package forgetest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// BotLogin is the login of the account whose token the Fake and the stand-in servers accept.
const BotLogin = "alfred-bot"

// DefaultLabelColor is the color the Fake gives labels that SetLabels and EnsureLabels create,
// and the color of labels that Seeder.AddLabel and Seeder.AddIssue create.
const DefaultLabelColor = "#6699cc"

// SeedIssue describes an issue for Seeder.AddIssue. Author defaults to BotLogin; labels that
// the repository lacks are created, and every login must have been added with AddUser.
type SeedIssue struct {
	Title     string
	Body      string
	Author    string
	Labels    []string
	Assignees []string
	Closed    bool
}

// CIJob is one CI job for Seeder.SetCI: a GitLab job of the pipeline (Log is its trace) or a
// Forgejo commit status (Name is the context, Log the description). State is one of
// forge.CISuccess, CIFailed, CIPending, CISkipped.
type CIJob struct {
	Name   string
	State  forge.CIState
	Log    string
	WebURL string
}

// model is the in-memory forge state shared by the Fake and the stand-in servers. Every
// method takes mu unless its name ends in Locked.
type model struct {
	mu sync.Mutex
	// sharedNumbers: issues and merge requests share one number space (Forgejo).
	sharedNumbers bool
	seq           int64
	clock         time.Time
	users         map[string]*modelUser // by lower-case login
	repos         map[string]*modelRepo // by lower-case path
	orgLabels     map[string][]*modelLabel
	pageSize      int
	rateLimit     int // answer 429 to this many more calls
	rateLimited   int // 429s answered (or simulated) so far
	retryAfter    int // seconds sent in Retry-After with a 429
	failNext      []int
	requests      []string
}

type modelUser struct {
	id    int64
	login string
	bot   bool
}

type modelLabel struct {
	id    int64
	name  string
	color string
}

type modelRepo struct {
	id            int64
	path          string
	defaultBranch string
	cloneURL      string
	access        map[string]int // lower-case login → GitLab access level (10 guest … 50 owner)
	labels        []*modelLabel
	issues        map[int64]*modelIssue
	mrs           map[int64]*modelIssue // unused when sharedNumbers
	lastIssue     int64
	lastMR        int64
	branches      map[string]string // branch → head sha
	runs          map[string][]*modelRun
	hooks         []forge.Hook
}

type modelIssue struct {
	id        int64
	number    int64
	mr        bool
	title     string
	body      string
	state     string // "open", "closed", "merged"
	author    *modelUser
	labels    []string
	assignees []string
	comments  []*modelComment
	created   time.Time
	updated   time.Time
	// merge request fields
	source, target, sha string
}

type modelComment struct {
	id      int64
	body    string
	author  *modelUser
	system  bool
	created time.Time
	updated time.Time
}

type modelRun struct {
	id     int64
	sha    string
	ref    string
	status string // GitLab pipeline status; "" derives it from jobs
	jobs   []*modelJob
}

type modelJob struct {
	id int64
	CIJob
}

func newModel(shared bool) *model {
	m := &model{
		sharedNumbers: shared,
		clock:         time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		users:         map[string]*modelUser{},
		repos:         map[string]*modelRepo{},
		orgLabels:     map[string][]*modelLabel{},
	}
	m.users[strings.ToLower(BotLogin)] = &modelUser{id: m.nextID(), login: BotLogin, bot: true}
	return m
}

func (m *model) nextID() int64 { m.seq++; return m.seq }

// now advances a fake clock one second per call, so creation order is strict.
func (m *model) now() time.Time { m.clock = m.clock.Add(time.Second); return m.clock }

func (m *model) userLocked(login string) *modelUser { return m.users[strings.ToLower(login)] }

func (m *model) repoLocked(path string) *modelRepo { return m.repos[strings.ToLower(path)] }

func (m *model) issueLocked(repo string, number int64, mr bool) *modelIssue {
	r := m.repoLocked(repo)
	if r == nil {
		return nil
	}
	if m.sharedNumbers {
		return r.issues[number]
	}
	if mr {
		return r.mrs[number]
	}
	return r.issues[number]
}

func (m *model) labelLocked(r *modelRepo, name string) *modelLabel {
	for _, l := range r.labels {
		if l.name == name {
			return l
		}
	}
	return nil
}

// ensureLabelLocked returns the repository label name, creating it with color when absent (an
// existing label keeps its color).
func (m *model) ensureLabelLocked(r *modelRepo, name, color string) *modelLabel {
	if l := m.labelLocked(r, name); l != nil {
		return l
	}
	l := &modelLabel{id: m.nextID(), name: name, color: color}
	r.labels = append(r.labels, l)
	return l
}

func (m *model) canWriteLocked(r *modelRepo, login string) bool {
	owner, _, _ := strings.Cut(r.path, "/")
	return strings.EqualFold(owner, login) || r.access[strings.ToLower(login)] >= 30
}

func (m *model) newMRLocked(r *modelRepo, author *modelUser, source, target, title, body string) *modelIssue {
	now := m.now()
	mi := &modelIssue{
		id: m.nextID(), mr: true, title: title, body: body, state: "open", author: author,
		source: source, target: target, sha: r.headLocked(source), created: now, updated: now,
	}
	if m.sharedNumbers {
		r.lastIssue++
		mi.number = r.lastIssue
		r.issues[mi.number] = mi
	} else {
		r.lastMR++
		mi.number = r.lastMR
		r.mrs[mi.number] = mi
	}
	return mi
}

func (r *modelRepo) headLocked(branch string) string {
	if sha, ok := r.branches[branch]; ok {
		return sha
	}
	sum := sha1.Sum([]byte(r.path + "\x00" + branch))
	return hex.EncodeToString(sum[:])
}

func (r *modelRepo) openMRLocked(shared bool, branch string) *modelIssue {
	set := r.mrs
	if shared {
		set = r.issues
	}
	var found *modelIssue
	for _, mi := range set {
		if mi.mr && mi.state == "open" && mi.source == branch && (found == nil || mi.number < found.number) {
			found = mi
		}
	}
	return found
}

func (r *modelRepo) allMRsLocked(shared bool) []*modelIssue {
	set := r.mrs
	if shared {
		set = r.issues
	}
	var out []*modelIssue
	for _, mi := range set {
		if mi.mr {
			out = append(out, mi)
		}
	}
	slices.SortFunc(out, func(a, b *modelIssue) int { return int(a.number - b.number) })
	return out
}

func (m *model) findCommentLocked(r *modelRepo, id int64) (*modelIssue, *modelComment) {
	for _, set := range []map[int64]*modelIssue{r.issues, r.mrs} {
		for _, is := range set {
			for _, c := range is.comments {
				if c.id == id {
					return is, c
				}
			}
		}
	}
	return nil, nil
}

// runStatus is the GitLab pipeline status of a run.
func (run *modelRun) runStatus() string {
	if run.status != "" {
		return run.status
	}
	if len(run.jobs) == 0 {
		return "created"
	}
	var failed, pending, skipped bool
	for _, j := range run.jobs {
		switch j.State {
		case forge.CIFailed:
			failed = true
		case forge.CIPending:
			pending = true
		case forge.CISkipped:
			skipped = true
		}
	}
	switch {
	case failed:
		return "failed"
	case pending:
		return "running"
	case skipped && !slices.ContainsFunc(run.jobs, func(j *modelJob) bool { return j.State == forge.CISuccess }):
		return "skipped"
	}
	return "success"
}

// takeRateLimit reports whether this call is to be answered 429, counts it, and returns the
// Retry-After seconds.
func (m *model) takeRateLimit() (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rateLimit > 0 {
		m.rateLimit--
		m.rateLimited++
		return m.retryAfter, true
	}
	return 0, false
}

// takeFailure returns the status to fail this call with, 0 for none.
func (m *model) takeFailure() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.failNext) == 0 {
		return 0
	}
	s := m.failNext[0]
	m.failNext = m.failNext[1:]
	return s
}

func (m *model) logRequest(s string) {
	m.mu.Lock()
	m.requests = append(m.requests, s)
	m.mu.Unlock()
}

// ---- Seeder methods, shared by Fake, GitLabServer and ForgejoServer ----

// BotLogin returns the login of the token's account, BotLogin.
func (m *model) BotLogin() string { return BotLogin }

// AddUser creates an account (or returns the existing one) and returns it with its id.
func (m *model) AddUser(login string) forge.User {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.userLocked(login)
	if u == nil {
		u = &modelUser{id: m.nextID(), login: login}
		m.users[strings.ToLower(login)] = u
	}
	return forge.User{ID: u.id, Login: u.login, Bot: u.bot}
}

// AddRepo creates the repository "owner/name" (GitLab: any project path) with its default
// branch and the clone URL that Forge.Repository reports, verbatim (a test may point it at a
// local bare repository). Adding an existing path updates branch and URL.
func (m *model) AddRepo(repo, defaultBranch, cloneURL string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.repoLocked(repo); r != nil {
		r.defaultBranch, r.cloneURL = defaultBranch, cloneURL
		return
	}
	m.repos[strings.ToLower(repo)] = &modelRepo{
		id: m.nextID(), path: repo, defaultBranch: defaultBranch, cloneURL: cloneURL,
		access: map[string]int{}, issues: map[int64]*modelIssue{}, mrs: map[int64]*modelIssue{},
		branches: map[string]string{}, runs: map[string][]*modelRun{},
	}
}

// SetAccess gives login (created if needed) write access to repo (GitLab Developer, Forgejo
// write collaborator) or, with write false, read access only (GitLab Reporter, Forgejo read
// collaborator). It panics for an unknown repo, as every seeding method does.
func (m *model) SetAccess(repo, login string, write bool) {
	m.AddUser(login)
	m.mu.Lock()
	defer m.mu.Unlock()
	level := 20
	if write {
		level = 30
	}
	m.mustRepoLocked(repo).access[strings.ToLower(login)] = level
}

// SetAccessLevel sets login's GitLab access level on repo (10 Guest, 20 Reporter, 30
// Developer, 40 Maintainer, 50 Owner; 0 removes the membership). Forgejo reads ≥ 40 as
// admin, 30 as write, 10–20 as read.
func (m *model) SetAccessLevel(repo, login string, level int) {
	m.AddUser(login)
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	if level <= 0 {
		delete(r.access, strings.ToLower(login))
		return
	}
	r.access[strings.ToLower(login)] = level
}

func (m *model) mustRepoLocked(repo string) *modelRepo {
	r := m.repoLocked(repo)
	if r == nil {
		panic(fmt.Sprintf("forgetest: unknown repository %q", repo))
	}
	return r
}

func (m *model) mustUserLocked(login string) *modelUser {
	u := m.userLocked(login)
	if u == nil {
		panic(fmt.Sprintf("forgetest: unknown user %q", login))
	}
	return u
}

func (m *model) mustIssueLocked(ref forge.IssueRef) *modelIssue {
	is := m.issueLocked(ref.Repo, ref.Number, ref.MergeRequest)
	if is == nil {
		panic(fmt.Sprintf("forgetest: unknown issue %s", ref))
	}
	return is
}

// AddLabel creates a repository label with DefaultLabelColor if absent.
func (m *model) AddLabel(repo, name string) { m.AddLabelWithColor(repo, name, DefaultLabelColor) }

// AddLabelWithColor creates a repository label with color ("#rrggbb") if absent; an existing
// label keeps its color.
func (m *model) AddLabelWithColor(repo, name, color string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ensureLabelLocked(m.mustRepoLocked(repo), name, color)
}

// AddOrgLabel creates an organisation-level label for owner: on ForgejoServer an organisation
// label (/orgs/{org}/labels), on GitLabServer a label of the group whose full path is owner,
// which the projects below it inherit. The Fake keeps it but does not use it.
func (m *model) AddOrgLabel(owner, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := strings.ToLower(owner)
	for _, l := range m.orgLabels[key] {
		if l.name == name {
			return
		}
	}
	m.orgLabels[key] = append(m.orgLabels[key], &modelLabel{id: m.nextID(), name: name, color: "#aa0000"})
}

// AddIssue creates an issue and returns its number (GitLab iid, Forgejo index).
func (m *model) AddIssue(repo string, si SeedIssue) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	author := m.mustUserLocked(seedOr(si.Author, BotLogin))
	now := m.now()
	r.lastIssue++
	is := &modelIssue{
		id: m.nextID(), number: r.lastIssue, title: si.Title, body: si.Body, state: "open",
		author: author, created: now, updated: now,
	}
	if si.Closed {
		is.state = "closed"
	}
	for _, l := range si.Labels {
		m.ensureLabelLocked(r, l, DefaultLabelColor)
		if !slices.Contains(is.labels, l) {
			is.labels = append(is.labels, l)
		}
	}
	for _, a := range si.Assignees {
		is.assignees = append(is.assignees, m.mustUserLocked(a).login)
	}
	r.issues[is.number] = is
	return is.number
}

// AddMergeRequest opens a merge request from source into target (default branch when empty)
// authored by author (BotLogin when empty) and returns its number.
func (m *model) AddMergeRequest(repo, source, target, title, author string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	return m.newMRLocked(r, m.mustUserLocked(seedOr(author, BotLogin)), source, seedOr(target, r.defaultBranch), title, "").number
}

// SetBranch sets the head commit of branch, which merge requests from it report as HeadSHA.
// Without it a branch's head is a stable fake SHA-1 of repo and branch.
func (m *model) SetBranch(repo, branch, sha string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	r.branches[branch] = sha
	for _, mi := range r.allMRsLocked(m.sharedNumbers) {
		if mi.source == branch && mi.state == "open" {
			mi.sha = sha
		}
	}
}

// AddComment posts a comment by login (created if needed) and returns its id.
func (m *model) AddComment(ref forge.IssueRef, login, body string) int64 {
	m.AddUser(login)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addCommentLocked(m.mustIssueLocked(ref), m.mustUserLocked(login), body, false)
}

// AddSystemNote adds a GitLab system note ("added ~bug label"), which Comments must skip.
// Forgejo has no such comments in its comment API; ForgejoServer does not list them either.
func (m *model) AddSystemNote(ref forge.IssueRef, body string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addCommentLocked(m.mustIssueLocked(ref), m.mustUserLocked(BotLogin), body, true)
}

func (m *model) addCommentLocked(is *modelIssue, u *modelUser, body string, system bool) int64 {
	now := m.now()
	c := &modelComment{id: m.nextID(), body: body, author: u, system: system, created: now, updated: now}
	is.comments = append(is.comments, c)
	return c.id
}

// SetCI records a new CI run for sha, newer than any before it: on GitLab a pipeline whose
// status follows from the jobs (any failed: "failed"; else any pending: "running"; all
// skipped: "skipped"; else "success"), on Forgejo one commit status per job. No jobs means
// "nothing ran" for Forgejo and a "created" pipeline for GitLab; use ClearCI for CINone.
func (m *model) SetCI(repo, sha string, jobs ...CIJob) {
	m.addRun(repo, sha, "", "", jobs)
}

// AddPipeline records a GitLab pipeline with an explicit status ("canceled", "manual",
// "skipped", "running", …) and ref and returns its id.
func (m *model) AddPipeline(repo, sha, ref, status string, jobs ...CIJob) int64 {
	return m.addRun(repo, sha, ref, status, jobs)
}

func (m *model) addRun(repo, sha, ref, status string, jobs []CIJob) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	run := &modelRun{id: m.nextID(), sha: sha, ref: seedOr(ref, r.defaultBranch), status: status}
	for _, j := range jobs {
		run.jobs = append(run.jobs, &modelJob{id: m.nextID(), CIJob: j})
	}
	r.runs[sha] = append(r.runs[sha], run)
	return run.id
}

// ClearCI forgets every CI run of sha.
func (m *model) ClearCI(repo, sha string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mustRepoLocked(repo).runs, sha)
}

// MarkMerged marks the merge request number merged (state "merged").
func (m *model) MarkMerged(repo string, number int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mi := m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true})
	if !mi.mr {
		panic(fmt.Sprintf("forgetest: %s#%d is not a merge request", repo, number))
	}
	mi.state = "merged"
	mi.updated = m.now()
}

// SetPageSize caps the page size the servers answer with (GitLab per_page, Forgejo limit),
// so that small data spans several pages; 0 restores the forge default (GitLab 20 by default,
// 100 at most; Forgejo 30 by default, 50 at most). The Fake ignores it.
func (m *model) SetPageSize(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pageSize = n
}

// RateLimitNext makes the next n API calls answer HTTP 429 with a Retry-After header (0
// seconds unless SetRetryAfter says otherwise). The Fake, which has no HTTP, counts them as
// absorbed by the next call.
func (m *model) RateLimitNext(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rateLimit = n
}

// SetRetryAfter sets the delay in seconds that 429 answers ask for (Retry-After; GitLab also
// gets RateLimit-Reset, the Unix time of that moment).
func (m *model) SetRetryAfter(seconds int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retryAfter = seconds
}

// RateLimited returns how many 429 answers were given (or simulated) so far.
func (m *model) RateLimited() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rateLimited
}

// FailNext makes the next API calls answer the given HTTP statuses, one per call, in order
// (for example 502 to test retries). The Fake ignores it; use Fake.FailNextCall.
func (m *model) FailNext(statuses ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failNext = append(m.failNext, statuses...)
}

// Requests returns "METHOD /path?query" of every API request received so far (the Fake
// records forge method names instead; see Fake.Calls).
func (m *model) Requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// IssueLabels returns the label names of the issue or merge request, sorted.
func (m *model) IssueLabels(ref forge.IssueRef) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.mustIssueLocked(ref).labels)
	slices.Sort(out)
	return seedNonNil(out)
}

// IssueAssignees returns the assignee logins of the issue or merge request, sorted.
func (m *model) IssueAssignees(ref forge.IssueRef) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.mustIssueLocked(ref).assignees)
	slices.Sort(out)
	return seedNonNil(out)
}

// IssueBody returns the description of the issue or merge request.
func (m *model) IssueBody(ref forge.IssueRef) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mustIssueLocked(ref).body
}

// IssueComments returns the comments of the issue or merge request, oldest first, without system
// notes.
func (m *model) IssueComments(ref forge.IssueRef) []forge.Comment {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []forge.Comment
	for _, c := range m.mustIssueLocked(ref).comments {
		if !c.system {
			out = append(out, c.forge())
		}
	}
	return out
}

func (c *modelComment) forge() forge.Comment {
	return forge.Comment{
		ID: c.id, Body: c.body, Author: forge.User{ID: c.author.id, Login: c.author.login, Bot: c.author.bot},
		CreatedAt: c.created, UpdatedAt: c.updated,
	}
}

// RepoLabels returns the names of the repository's labels, sorted.
func (m *model) RepoLabels(repo string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, l := range m.mustRepoLocked(repo).labels {
		out = append(out, l.name)
	}
	slices.Sort(out)
	return seedNonNil(out)
}

// LabelColor returns the color ("#rrggbb", as created) of the repository label name, "" when
// the repository has no such label.
func (m *model) LabelColor(repo, name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.labelLocked(m.mustRepoLocked(repo), name); l != nil {
		return l.color
	}
	return ""
}

// MergeRequests returns the repository's merge requests by number.
func (m *model) MergeRequests(repo string) []forge.MergeRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []forge.MergeRequest
	for _, mi := range m.mustRepoLocked(repo).allMRsLocked(m.sharedNumbers) {
		out = append(out, *mi.forgeMR())
	}
	return out
}

func (mi *modelIssue) forgeMR() *forge.MergeRequest {
	return &forge.MergeRequest{
		Number: mi.number, Title: mi.title, Body: mi.body, SourceBranch: mi.source, TargetBranch: mi.target,
		HeadSHA: mi.sha, State: mi.state, Merged: mi.state == "merged",
		Author: forge.User{ID: mi.author.id, Login: mi.author.login, Bot: mi.author.bot},
	}
}

func seedNonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func seedOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ---- Fake ----

// FakeCall is one recorded call of a Fake's forge.Forge method.
type FakeCall struct {
	Method string         // "Comment", "SetLabels", …
	Repo   string         // repository, "" for BotUser
	Ref    forge.IssueRef // zero for repository-level methods
	Args   []string       // the string arguments: body, labels, logins, branch, sha
}

// Fake is a recording, in-memory forge.Forge with the semantics the real clients have:
// ErrNotFound for missing repositories, issues, merge requests, comments and (for
// SetAssignees) users; SetLabels and EnsureLabels create missing repository labels with
// DefaultLabelColor and leave existing ones as they are; adding a present label or removing
// an absent one is a no-op; CreateMergeRequest returns the open merge request of the source
// branch. Issues and merge requests have separate number spaces. Seed it and read it back with
// the Seeder methods. Safe for concurrent use.
type Fake struct {
	*model
	kind forge.Kind

	hmu   sync.Mutex
	calls []FakeCall
	fail  map[string][]error
	hook  func(method string, ref forge.IssueRef) error
}

var (
	_ forge.Forge = (*Fake)(nil)
	_ Seeder      = (*Fake)(nil)
)

// NewFake returns an empty Fake reporting kind, with only the bot account (BotLogin).
func NewFake(kind forge.Kind) *Fake {
	return &Fake{model: newModel(false), kind: kind, fail: map[string][]error{}}
}

// FailNextCall makes the next call of method (e.g. "Comment") return err, once per call.
func (f *Fake) FailNextCall(method string, errs ...error) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	f.fail[method] = append(f.fail[method], errs...)
}

// SetErrorHook installs fn, called at the start of every forge method (ref is zero for
// repository-level methods); a non-nil result is returned instead of doing the call. nil
// removes the hook.
func (f *Fake) SetErrorHook(fn func(method string, ref forge.IssueRef) error) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	f.hook = fn
}

// Calls returns the forge method calls made so far, in order.
func (f *Fake) Calls() []FakeCall {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	return slices.Clone(f.calls)
}

// enter records a call and returns an injected error, if any.
func (f *Fake) enter(ctx context.Context, method, repo string, ref forge.IssueRef, args ...string) error {
	f.hmu.Lock()
	f.calls = append(f.calls, FakeCall{Method: method, Repo: repo, Ref: ref, Args: args})
	var err error
	if q := f.fail[method]; len(q) > 0 {
		err, f.fail[method] = q[0], q[1:]
	}
	hook := f.hook
	f.hmu.Unlock()
	if err != nil {
		return err
	}
	if hook != nil {
		if err := hook(method, ref); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	if f.rateLimit > 0 { // what a real client's retries absorb
		f.rateLimited += f.rateLimit
		f.rateLimit = 0
	}
	f.mu.Unlock()
	return nil
}

func fakeNotFound(format string, args ...any) error {
	return fmt.Errorf("fake forge: "+format+": %w", append(args, forge.ErrNotFound)...)
}

// Kind returns the kind given to NewFake.
func (f *Fake) Kind() forge.Kind { return f.kind }

// BotUser returns the BotLogin account.
func (f *Fake) BotUser(ctx context.Context) (forge.User, error) {
	if err := f.enter(ctx, "BotUser", "", forge.IssueRef{}); err != nil {
		return forge.User{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.userLocked(BotLogin)
	return forge.User{ID: u.id, Login: u.login, Bot: true}, nil
}

// CanWrite is true for the repository owner and for logins given write access.
func (f *Fake) CanWrite(ctx context.Context, repo, login string) (bool, error) {
	if err := f.enter(ctx, "CanWrite", repo, forge.IssueRef{}, login); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(repo)
	if r == nil {
		return false, fakeNotFound("repository %s", repo)
	}
	return f.canWriteLocked(r, login), nil
}

// Repository returns the seeded default branch and clone URL.
func (f *Fake) Repository(ctx context.Context, repo string) (*forge.Repository, error) {
	if err := f.enter(ctx, "Repository", repo, forge.IssueRef{}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(repo)
	if r == nil {
		return nil, fakeNotFound("repository %s", repo)
	}
	return &forge.Repository{Path: r.path, DefaultBranch: r.defaultBranch, CloneURL: r.cloneURL}, nil
}

func (f *Fake) issueOrErr(ref forge.IssueRef) (*modelIssue, error) {
	is := f.issueLocked(ref.Repo, ref.Number, ref.MergeRequest)
	if is == nil {
		return nil, fakeNotFound("issue %s", ref)
	}
	return is, nil
}

// Issue reads an issue (or merge request, as an issue: "merged" reads "closed").
func (f *Fake) Issue(ctx context.Context, ref forge.IssueRef) (*forge.Issue, error) {
	if err := f.enter(ctx, "Issue", ref.Repo, ref); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is, err := f.issueOrErr(ref)
	if err != nil {
		return nil, err
	}
	state := is.state
	if state == "merged" {
		state = "closed"
	}
	return &forge.Issue{
		Ref: ref, Title: is.title, Body: is.body, State: state,
		Author: forge.User{ID: is.author.id, Login: is.author.login, Bot: is.author.bot},
		Labels: seedNonNil(slices.Clone(is.labels)), Assignees: seedNonNil(slices.Clone(is.assignees)),
	}, nil
}

// SetIssueBody replaces the description.
func (f *Fake) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	if err := f.enter(ctx, "SetIssueBody", ref.Repo, ref, body); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is, err := f.issueOrErr(ref)
	if err != nil {
		return err
	}
	is.body, is.updated = body, f.now()
	return nil
}

// Comments lists the comments oldest first, without system notes.
func (f *Fake) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	if err := f.enter(ctx, "Comments", ref.Repo, ref); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is, err := f.issueOrErr(ref)
	if err != nil {
		return nil, err
	}
	var out []forge.Comment
	for _, c := range is.comments {
		if !c.system {
			out = append(out, c.forge())
		}
	}
	return out, nil
}

// Comment posts a comment as the bot.
func (f *Fake) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	if err := f.enter(ctx, "Comment", ref.Repo, ref, body); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is, err := f.issueOrErr(ref)
	if err != nil {
		return 0, err
	}
	return f.addCommentLocked(is, f.userLocked(BotLogin), body, false), nil
}

// EditComment replaces a comment's body; ErrNotFound when the issue has no such comment.
func (f *Fake) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	if err := f.enter(ctx, "EditComment", ref.Repo, ref, fmt.Sprint(id), body); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is, err := f.issueOrErr(ref)
	if err != nil {
		return err
	}
	for _, c := range is.comments {
		if c.id == id && !c.system {
			c.body, c.updated = body, f.now()
			return nil
		}
	}
	return fakeNotFound("comment %d on %s", id, ref)
}

// SetLabels adds and removes labels, creating missing repository labels. A name in both
// lists is added.
func (f *Fake) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	if err := f.enter(ctx, "SetLabels", ref.Repo, ref, append(slices.Clone(add), remove...)...); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is, err := f.issueOrErr(ref)
	if err != nil {
		return err
	}
	add = f.ensureLabelsLocked(f.repoLocked(ref.Repo), add)
	is.labels = slices.DeleteFunc(is.labels, func(l string) bool { return slices.Contains(remove, l) && !slices.Contains(add, l) })
	for _, l := range add {
		if !slices.Contains(is.labels, l) {
			is.labels = append(is.labels, l)
		}
	}
	return nil
}

// EnsureLabels creates the repository labels among names that are missing, with
// DefaultLabelColor; existing labels keep their color. Organisation labels (AddOrgLabel) are
// not consulted. Empty names are skipped; with no names left it does nothing, even for an
// unknown repository (as the real clients make no request then).
func (f *Fake) EnsureLabels(ctx context.Context, repo string, names []string) error {
	if err := f.enter(ctx, "EnsureLabels", repo, forge.IssueRef{}, names...); err != nil {
		return err
	}
	if !slices.ContainsFunc(names, func(n string) bool { return n != "" }) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(repo)
	if r == nil {
		return fakeNotFound("repository %s", repo)
	}
	f.ensureLabelsLocked(r, names)
	return nil
}

// ensureLabelsLocked creates the missing labels of names in r and returns names without the
// empty ones.
func (f *Fake) ensureLabelsLocked(r *modelRepo, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n == "" {
			continue
		}
		f.ensureLabelLocked(r, n, DefaultLabelColor)
		out = append(out, n)
	}
	return out
}

// SetAssignees adds and removes assignees; an unknown added login is ErrNotFound.
func (f *Fake) SetAssignees(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	if err := f.enter(ctx, "SetAssignees", ref.Repo, ref, append(slices.Clone(add), remove...)...); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is, err := f.issueOrErr(ref)
	if err != nil {
		return err
	}
	for _, a := range add {
		if f.userLocked(a) == nil {
			return fakeNotFound("user %q", a)
		}
	}
	is.assignees = slices.DeleteFunc(is.assignees, func(a string) bool {
		return slices.ContainsFunc(remove, func(r string) bool { return strings.EqualFold(r, a) })
	})
	for _, a := range add {
		u := f.userLocked(a)
		if !slices.Contains(is.assignees, u.login) {
			is.assignees = append(is.assignees, u.login)
		}
	}
	return nil
}

// CreateMergeRequest returns the open merge request of the source branch or opens one
// authored by the bot.
func (f *Fake) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	if err := f.enter(ctx, "CreateMergeRequest", repo, forge.IssueRef{}, mr.SourceBranch, mr.TargetBranch, mr.Title); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(repo)
	if r == nil {
		return nil, fakeNotFound("repository %s", repo)
	}
	if mi := r.openMRLocked(f.sharedNumbers, mr.SourceBranch); mi != nil {
		return mi.forgeMR(), nil
	}
	mi := f.newMRLocked(r, f.userLocked(BotLogin), mr.SourceBranch, seedOr(mr.TargetBranch, r.defaultBranch), mr.Title, mr.Body)
	return mi.forgeMR(), nil
}

// MergeRequest reads a merge request.
func (f *Fake) MergeRequest(ctx context.Context, repo string, number int64) (*forge.MergeRequest, error) {
	ref := forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
	if err := f.enter(ctx, "MergeRequest", repo, ref); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	mi := f.issueLocked(repo, number, true)
	if mi == nil || !mi.mr {
		return nil, fakeNotFound("merge request %s!%d", repo, number)
	}
	return mi.forgeMR(), nil
}

// CIStatus reports the latest run recorded with SetCI or AddPipeline, mapped as the GitLab
// client maps pipelines; failed jobs carry their Log.
func (f *Fake) CIStatus(ctx context.Context, repo, sha string) (*forge.Pipeline, error) {
	if err := f.enter(ctx, "CIStatus", repo, forge.IssueRef{}, sha); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(repo)
	if r == nil {
		return nil, fakeNotFound("repository %s", repo)
	}
	runs := r.runs[sha]
	if len(runs) == 0 {
		return &forge.Pipeline{State: forge.CINone, SHA: sha}, nil
	}
	run := runs[len(runs)-1]
	p := &forge.Pipeline{ID: run.id, SHA: sha, Ref: run.ref}
	switch run.runStatus() {
	case "success":
		p.State = forge.CISuccess
	case "failed", "canceled":
		p.State = forge.CIFailed
	case "skipped", "manual":
		p.State = forge.CISkipped
	default:
		p.State = forge.CIPending
	}
	if p.State == forge.CIFailed {
		for _, j := range run.jobs {
			if j.State == forge.CIFailed {
				p.FailedJobs = append(p.FailedJobs, forge.FailedJob{Name: j.Name, WebURL: j.WebURL, Log: j.Log})
			}
		}
	}
	return p, nil
}
