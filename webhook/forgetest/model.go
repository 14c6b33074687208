package forgetest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

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
	teams         []*modelTeam
	merge         modelMergeRules // required approvals and protected branches (merge_model.go)
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
	activity  []forge.Activity // label, assignee and state history (Forge.Activity)
	created   time.Time
	updated   time.Time
	// merge request fields
	source, target, sha string
	reviews             []*modelReview        // Forgejo reviews, review requests included
	threadNotes         []*modelReviewComment // inline comments and thread replies
	mergeStatus         forge.MergeStatus     // "" reads as mergeable
	reviewers           []string
	approvedBy          []string             // GitLab approvals (Forgejo keeps them as APPROVED reviews)
	approvedAt          map[string]time.Time // GitLab: login → when it approved
	reviewerStates      map[string]string    // GitLab: login → its reviewer state (requested_changes, reviewed, approved)
	reviewerOrder       []string             // GitLab: the reviewers in the order they first reviewed
	versions            []modelVersion       // GitLab diff versions: each head the merge request had
	mergedWith          string               // the merge method of the merge that merged it
}

// modelVersion is one GitLab diff version of a merge request: its head and when it was made.
type modelVersion struct {
	id   int64
	sha  string
	made time.Time
}

// modelTeam is a Forgejo/Gitea organization team with access to a repository: units maps a
// unit ("repo.issues", "repo.code", …) to "read", "write" or "admin".
type modelTeam struct {
	id      int64
	name    string
	units   map[string]string
	members []string // lower-case logins
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
	// source is the merge request head a GitLab merged-results pipeline tested (its sha is
	// the merge commit of that head into the target branch, whose head then was target); ""
	// for any other run.
	source, target string
}

type modelJob struct {
	id int64
	CIJob
	child *modelRun // a bridge's downstream pipeline (CIJob.Child), nil for a job
}

// findJob returns the job with id in run or a child pipeline below it, nil for none.
func (run *modelRun) findJob(id int64) *modelJob {
	for _, j := range run.jobs {
		if j.id == id {
			return j
		}
		if j.child != nil {
			if got := j.child.findJob(id); got != nil {
				return got
			}
		}
	}
	return nil
}

// find returns run or the child pipeline below it with id, nil for none.
func (run *modelRun) find(id int64) *modelRun {
	if run.id == id {
		return run
	}
	for _, j := range run.jobs {
		if j.child != nil {
			if got := j.child.find(id); got != nil {
				return got
			}
		}
	}
	return nil
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

// roleLocked is login's role in r as the forge reports it: the owner is admin; GitLab maps the
// access level (forge.GitLabRole); Forgejo maps ≥ 40 to admin, 30 to write, and everyone else
// reads the (public) repository, a member of a team with write on issues as triage.
func (m *model) roleLocked(r *modelRepo, login string) forge.Role {
	owner, _, _ := strings.Cut(r.path, "/")
	if strings.EqualFold(owner, login) {
		return forge.RoleAdmin
	}
	level := r.access[strings.ToLower(login)]
	if !m.sharedNumbers {
		return forge.GitLabRole(level)
	}
	switch {
	case level >= 40:
		return forge.RoleAdmin
	case level >= 30:
		return forge.RoleWrite
	}
	for _, t := range r.teams {
		if slices.Contains(t.members, strings.ToLower(login)) && t.units["repo.issues"] != "" && t.units["repo.issues"] != "read" {
			return forge.RoleTriage
		}
	}
	return forge.RoleRead
}

func (m *model) newMRLocked(r *modelRepo, author *modelUser, source, target, title, body string) *modelIssue {
	now := m.now()
	mi := &modelIssue{
		id: m.nextID(), mr: true, title: title, body: body, state: "open", author: author,
		source: source, target: target, sha: r.headLocked(source), created: now, updated: now,
	}
	mi.versions = []modelVersion{{id: m.nextID(), sha: mi.sha, made: now}}
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

func (m *model) mustRepoLocked(repo string) *modelRepo {
	r := m.repoLocked(repo)
	if r == nil {
		panic(fmt.Sprintf("forgetest: unknown repository %q", repo))
	}
	return r
}

// userOrNewLocked returns login's user, added (without any access) when the forge has none.
func (m *model) userOrNewLocked(login string) *modelUser {
	u := m.userLocked(login)
	if u == nil {
		u = &modelUser{id: m.nextID(), login: login}
		m.users[strings.ToLower(login)] = u
	}
	return u
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
