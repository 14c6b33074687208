package forgetest

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
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
	// Child, when set, makes the job a GitLab trigger job (a bridge, listed by
	// …/pipelines/:id/bridges, not …/jobs) whose downstream child pipeline runs these jobs;
	// State is the bridge's. Forgejo reads it as a plain status.
	Child []CIJob
}

// The Seeder methods below are shared by Fake, GitLabServer and ForgejoServer through the
// embedded model.

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
		if mi.source == branch && mi.state == "open" && mi.sha != sha {
			mi.sha = sha
			mi.versions = append(mi.versions, modelVersion{id: m.nextID(), sha: sha, made: m.now()})
		}
	}
}

// AddTeam gives a Forgejo/Gitea organization team access to repo: units maps a unit
// ("repo.issues", "repo.code", …) to "read", "write" or "admin"; members (created if needed)
// are in the team. A team whose units give write on issues and read on code is what Gitea
// offers for triage: its members may label and assign, not push (their permission reads
// "read").
func (m *model) AddTeam(repo, name string, units map[string]string, members ...string) {
	for _, login := range members {
		m.AddUser(login)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	t := &modelTeam{id: m.nextID(), name: name, units: units}
	for _, login := range members {
		t.members = append(t.members, strings.ToLower(login))
	}
	r.teams = append(r.teams, t)
}

// AddComment posts a comment by login (created if needed) and returns its id.
func (m *model) AddComment(ref forge.IssueRef, login, body string) int64 {
	m.AddUser(login)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addCommentLocked(m.mustIssueLocked(ref), m.mustUserLocked(login), body, false)
}

// DeleteComment deletes comment id of the issue, as a person does in the web UI (anyone's,
// Alfred's included): the API answers 404 for it from then on.
func (m *model) DeleteComment(ref forge.IssueRef, id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	is := m.mustIssueLocked(ref)
	is.comments = slices.DeleteFunc(is.comments, func(c *modelComment) bool { return c.id == id })
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
	is.updated = now // both forges move the issue's updated time on a new comment
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
	m.addJobsLocked(run, jobs)
	r.runs[sha] = append(r.runs[sha], run)
	return run.id
}

// AddMergedResultsPipeline records a GitLab merged-results pipeline of merge request mr: a
// pipeline on refs/merge-requests/<mr>/merge whose sha is the merge commit of the merge
// request's current head into its target branch (a commit no branch has), with status as
// AddPipeline's ("" derives it from jobs). GitLab reports it as the merge request's
// head_pipeline while that head lasts. It returns the pipeline's id and the merge commit.
func (m *model) AddMergedResultsPipeline(repo string, mr int64, status string, jobs ...CIJob) (id int64, mergeSHA string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	mi := m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: mr, MergeRequest: true})
	id = m.nextID()
	mergeSHA = fmt.Sprintf("%040x", sha256.Sum256(fmt.Appendf(nil, "merge %s into %s, pipeline %d", mi.sha, mi.target, id)))[:40]
	run := &modelRun{id: id, sha: mergeSHA, ref: fmt.Sprintf("refs/merge-requests/%d/merge", mr), status: status,
		source: mi.sha, target: r.branches[mi.target]}
	m.addJobsLocked(run, jobs)
	r.runs[mergeSHA] = append(r.runs[mergeSHA], run)
	return id, mergeSHA
}

// headPipelineLocked is GitLab's head_pipeline of merge request mi: the latest pipeline of the
// newest head that has one, whether it ran on that head itself or on its merge into the
// target (merged results). Like GitLab's (MergeRequest#update_head_pipeline), it stays on an
// older head's pipeline until the current head has one. nil when no head had one.
func (r *modelRepo) headPipelineLocked(mi *modelIssue) *modelRun {
	for i := len(mi.versions) - 1; i >= 0; i-- {
		v := mi.versions[i].sha
		var head *modelRun
		for sha, runs := range r.runs {
			for _, run := range runs {
				if v != "" && (sha == v || run.source == v) && (head == nil || run.id > head.id) {
					head = run
				}
			}
		}
		if head != nil {
			return head
		}
	}
	return nil
}

// commitParentsLocked returns the parents the model knows of commit sha: the merged head (and
// the target branch's head then) for the merge commit of a merged-results pipeline; none for
// any other commit.
func (r *modelRepo) commitParentsLocked(sha string) []string {
	for _, run := range r.runs[sha] {
		if run.source != "" {
			return []string{run.target, run.source}
		}
	}
	return []string{}
}

// addJobsLocked adds jobs to run; a job with Child jobs gets its child pipeline, on the same
// commit and ref.
func (m *model) addJobsLocked(run *modelRun, jobs []CIJob) {
	for _, j := range jobs {
		job := &modelJob{id: m.nextID(), CIJob: j}
		if len(j.Child) > 0 {
			job.child = &modelRun{id: m.nextID(), sha: run.sha, ref: run.ref}
			m.addJobsLocked(job.child, j.Child)
		}
		run.jobs = append(run.jobs, job)
	}
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

// SetClock sets the forge's clock, which moves one second per change: tests that compare the
// forge's times with Alfred's start both at the same time.
func (m *model) SetClock(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clock = t
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
	out := &forge.MergeRequest{
		Number: mi.number, Title: mi.title, Body: mi.body, SourceBranch: mi.source, TargetBranch: mi.target,
		HeadSHA: mi.sha, State: mi.state, Merged: mi.state == "merged", UpdatedAt: mi.updated,
		Author: forge.User{ID: mi.author.id, Login: mi.author.login, Bot: mi.author.bot},
	}
	if mi.state == "open" {
		out.MergeStatus = mi.mergeStatusOr()
	}
	return out
}

// mergeStatusOr is the seeded merge status, mergeable by default.
func (mi *modelIssue) mergeStatusOr() forge.MergeStatus {
	if mi.mergeStatus == forge.MergeStatusUnknown {
		return forge.MergeStatusMergeable
	}
	return mi.mergeStatus
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
