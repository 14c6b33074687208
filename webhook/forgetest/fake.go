package forgetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/alfred-bot/alfred/webhook/forge"
)

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

// withRepo records the call (see enter) and runs fn on the repository under the model's lock;
// an unknown repository is ErrNotFound and fn does not run.
func (f *Fake) withRepo(ctx context.Context, method, repo string, args []string, fn func(r *modelRepo) error) error {
	if err := f.enter(ctx, method, repo, forge.IssueRef{}, args...); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(repo)
	if r == nil {
		return fakeNotFound("repository %s", repo)
	}
	return fn(r)
}

// withIssue records the call (see enter) and runs fn on the issue or merge request of ref under
// the model's lock; an unknown one is ErrNotFound and fn does not run.
func (f *Fake) withIssue(ctx context.Context, method string, ref forge.IssueRef, args []string, fn func(is *modelIssue) error) error {
	if err := f.enter(ctx, method, ref.Repo, ref, args...); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	is := f.issueLocked(ref.Repo, ref.Number, ref.MergeRequest)
	if is == nil {
		return fakeNotFound("issue %s", ref)
	}
	return fn(is)
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

// Role is login's role as the forge of the Fake's kind reports it (see roleLocked).
func (f *Fake) Role(ctx context.Context, repo, login string) (role forge.Role, err error) {
	err = f.withRepo(ctx, "Role", repo, []string{login}, func(r *modelRepo) error {
		role = f.roleLocked(r, login)
		return nil
	})
	return role, err
}

// Repository returns the seeded default branch and clone URL.
func (f *Fake) Repository(ctx context.Context, repo string) (out *forge.Repository, err error) {
	err = f.withRepo(ctx, "Repository", repo, nil, func(r *modelRepo) error {
		out = &forge.Repository{Path: r.path, DefaultBranch: r.defaultBranch, CloneURL: r.cloneURL}
		return nil
	})
	return out, err
}

// Issue reads an issue (or merge request, as an issue: "merged" reads "closed").
func (f *Fake) Issue(ctx context.Context, ref forge.IssueRef) (out *forge.Issue, err error) {
	err = f.withIssue(ctx, "Issue", ref, nil, func(is *modelIssue) error {
		state := is.state
		if state == "merged" {
			state = "closed"
		}
		out = &forge.Issue{
			Ref: ref, Title: is.title, Body: is.body, State: state,
			Author: forge.User{ID: is.author.id, Login: is.author.login, Bot: is.author.bot},
			Labels: seedNonNil(slices.Clone(is.labels)), Assignees: seedNonNil(slices.Clone(is.assignees)),
			UpdatedAt: is.updated,
		}
		return nil
	})
	return out, err
}

// SetIssueBody replaces the description.
func (f *Fake) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	return f.withIssue(ctx, "SetIssueBody", ref, []string{body}, func(is *modelIssue) error {
		is.body, is.updated = body, f.now()
		return nil
	})
}

// Comments lists the comments oldest first, without system notes.
func (f *Fake) Comments(ctx context.Context, ref forge.IssueRef) (out []forge.Comment, err error) {
	err = f.withIssue(ctx, "Comments", ref, nil, func(is *modelIssue) error {
		for _, c := range is.comments {
			if !c.system {
				out = append(out, c.forge())
			}
		}
		return nil
	})
	return out, err
}

// Comment posts a comment as the bot.
func (f *Fake) Comment(ctx context.Context, ref forge.IssueRef, body string) (id int64, err error) {
	err = f.withIssue(ctx, "Comment", ref, []string{body}, func(is *modelIssue) error {
		id = f.addCommentLocked(is, f.userLocked(BotLogin), body, false)
		return nil
	})
	return id, err
}

// EditComment replaces a comment's body; ErrNotFound when the issue has no such comment.
func (f *Fake) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	return f.withIssue(ctx, "EditComment", ref, []string{fmt.Sprint(id), body}, func(is *modelIssue) error {
		for _, c := range is.comments {
			if c.id == id && !c.system {
				c.body, c.updated = body, f.now()
				return nil
			}
		}
		return fakeNotFound("comment %d on %s", id, ref)
	})
}

// SetLabels adds and removes labels, creating missing repository labels. A name in both
// lists is added.
func (f *Fake) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	return f.withIssue(ctx, "SetLabels", ref, append(slices.Clone(add), remove...), func(is *modelIssue) error {
		defer f.recordLocked(is, f.userLocked(BotLogin), snap(is))
		add := f.ensureLabelsLocked(f.repoLocked(ref.Repo), add)
		is.labels = slices.DeleteFunc(is.labels, func(l string) bool { return slices.Contains(remove, l) && !slices.Contains(add, l) })
		for _, l := range add {
			if !slices.Contains(is.labels, l) {
				is.labels = append(is.labels, l)
			}
		}
		return nil
	})
}

// EnsureLabels creates the repository labels among names that are missing, with
// DefaultLabelColor; existing labels keep their color. Organisation labels (AddOrgLabel) are
// not consulted. Empty names are skipped; with no names left it does nothing, even for an
// unknown repository (as the real clients make no request then).
func (f *Fake) EnsureLabels(ctx context.Context, repo string, names []string) error {
	if !slices.ContainsFunc(names, func(n string) bool { return n != "" }) {
		return f.enter(ctx, "EnsureLabels", repo, forge.IssueRef{}, names...)
	}
	return f.withRepo(ctx, "EnsureLabels", repo, names, func(r *modelRepo) error {
		f.ensureLabelsLocked(r, names)
		return nil
	})
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
	return f.withIssue(ctx, "SetAssignees", ref, append(slices.Clone(add), remove...), func(is *modelIssue) error {
		defer f.recordLocked(is, f.userLocked(BotLogin), snap(is))
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
	})
}

// CreateMergeRequest returns the open merge request of the source branch or opens one
// authored by the bot.
func (f *Fake) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (out *forge.MergeRequest, err error) {
	err = f.withRepo(ctx, "CreateMergeRequest", repo, []string{mr.SourceBranch, mr.TargetBranch, mr.Title}, func(r *modelRepo) error {
		mi := r.openMRLocked(f.sharedNumbers, mr.SourceBranch)
		if mi == nil {
			mi = f.newMRLocked(r, f.userLocked(BotLogin), mr.SourceBranch, seedOr(mr.TargetBranch, r.defaultBranch), mr.Title, mr.Body)
		}
		out = mi.forgeMR()
		return nil
	})
	return out, err
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
// client maps pipelines; failed jobs carry their Log. A GitLab fake with no run of sha reports
// the head pipeline of an open merge request whose head sha is (a merged-results pipeline,
// AddMergedResultsPipeline), as the GitLab client does.
func (f *Fake) CIStatus(ctx context.Context, repo, sha string) (out *forge.Pipeline, err error) {
	err = f.withRepo(ctx, "CIStatus", repo, []string{sha}, func(r *modelRepo) error {
		if sha == "" {
			out = &forge.Pipeline{State: forge.CINone} // no commit, no CI
			return nil
		}
		if runs := r.runs[sha]; len(runs) > 0 {
			out = runs[len(runs)-1].pipeline()
			return nil
		}
		out = &forge.Pipeline{State: forge.CINone, SHA: sha}
		if f.kind != forge.KindGitLab {
			return nil
		}
		for _, mi := range r.allMRsLocked(f.sharedNumbers) {
			if mi.state == "open" && mi.sha == sha {
				// head_pipeline may still be an older head's: only the head's own counts.
				if run := r.headPipelineLocked(mi); run != nil && (run.sha == sha || run.source == sha) {
					out = run.pipeline()
				}
				return nil
			}
		}
		return nil
	})
	return out, err
}

// pipeline maps the run to a forge.Pipeline as the GitLab client does.
func (run *modelRun) pipeline() *forge.Pipeline {
	p := &forge.Pipeline{ID: run.id, SHA: run.sha, Ref: run.ref}
	switch run.runStatus() {
	case "success":
		p.State = forge.CISuccess
	case "failed":
		p.State = forge.CIFailed
	case "canceled", "canceling":
		p.State = forge.CICanceled
	case "skipped", "manual":
		p.State = forge.CISkipped
	default:
		p.State = forge.CIPending
	}
	if p.State == forge.CIFailed {
		p.FailedJobs = run.failedJobs("")
	}
	return p
}

// failedJobs returns the failed jobs of run as the GitLab client reports them: those of a
// failed trigger job's child pipeline named "<trigger job> / <job>", after prefix.
func (run *modelRun) failedJobs(prefix string) []forge.FailedJob {
	var out []forge.FailedJob
	for _, j := range run.jobs {
		switch {
		case j.State != forge.CIFailed:
		case j.child != nil:
			out = append(out, j.child.failedJobs(prefix+j.Name+" / ")...)
		default:
			out = append(out, forge.FailedJob{Name: prefix + j.Name, WebURL: j.WebURL, Log: j.Log})
		}
	}
	return out
}
