package forgetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Seeder puts a forge into a known state and reads it back, bypassing the forge.Forge under
// test. Fake, GitLabServer and ForgejoServer implement it. Seeding methods panic on unknown
// repositories, issues and users: that is a broken test, not a forge answer.
type Seeder interface {
	// BotLogin is the login of the account the token belongs to (BotUser's answer).
	BotLogin() string
	// AddUser creates an account and returns it with its id; adding it again is a no-op.
	AddUser(login string) forge.User
	// AddRepo creates repository repo ("owner/name") with its default branch and the clone
	// URL that Repository must report verbatim.
	AddRepo(repo, defaultBranch, cloneURL string)
	// SetAccessLevel sets login's access level on repo (GitLab's numbers: 10 Guest … 40
	// Maintainer, 50 Owner; Forgejo reads 40 or more as admin); 0 removes it.
	SetAccessLevel(repo, login string, level int)
	// AddHook configures a webhook on repo as a maintainer would (ID assigned when 0) and
	// returns its id; Events are the forge's own event names (forge.Hook).
	AddHook(repo string, h forge.Hook) int64
	// AddTeam gives an organization team access to repo with units ("repo.issues": "write",
	// …) and members (Forgejo/Gitea; GitLab has no teams and ignores it in Role).
	AddTeam(repo, name string, units map[string]string, members ...string)
	// SetAccess gives login write access (GitLab Developer, Forgejo write) or, with write
	// false, read access only (GitLab Reporter, Forgejo read).
	SetAccess(repo, login string, write bool)
	// AddLabel creates a repository label with DefaultLabelColor.
	AddLabel(repo, name string)
	// AddLabelWithColor creates a repository label with color ("#rrggbb").
	AddLabelWithColor(repo, name, color string)
	// AddIssue creates an issue and returns its number.
	AddIssue(repo string, issue SeedIssue) int64
	// AddComment posts a comment by login and returns its id.
	AddComment(ref forge.IssueRef, login, body string) int64
	// SetCI records a new, latest CI run for sha made of jobs.
	SetCI(repo, sha string, jobs ...CIJob)
	// SetBranch points branch at sha; an open merge request from it gets sha as its head.
	SetBranch(repo, branch, sha string)
	// AddMergedResultsPipeline records a GitLab merged-results pipeline of merge request mr's
	// head (it runs on a merge commit of the head into the target) and returns its id and
	// that merge commit.
	AddMergedResultsPipeline(repo string, mr int64, status string, jobs ...CIJob) (id int64, mergeSHA string)
	// MarkMerged marks a merge request merged.
	MarkMerged(repo string, number int64)
	// SetPageSize caps list pages at n items (0: the forge default), to exercise pagination.
	SetPageSize(n int)
	// RateLimitNext makes the next n API calls answer 429 with a Retry-After header.
	RateLimitNext(n int)
	// RateLimited counts the 429 answers given so far.
	RateLimited() int

	// SetIssueLabels, SetIssueAssignees, SetIssueState and EditCommentAs change an issue (or
	// merge request) the way actor would while no webhook reaches Alfred; each moves the
	// issue's updated time and the first three record the change for Activity.
	SetIssueLabels(ref forge.IssueRef, actor string, labels ...string)
	SetIssueAssignees(ref forge.IssueRef, actor string, logins ...string)
	SetIssueState(ref forge.IssueRef, actor, state string)
	EditCommentAs(ref forge.IssueRef, id int64, body string)

	// IssueLabels, IssueAssignees, IssueBody and IssueComments read an issue's (or merge
	// request's) state; lists are sorted (comments oldest first, without system notes).
	IssueLabels(ref forge.IssueRef) []string
	IssueAssignees(ref forge.IssueRef) []string
	IssueBody(ref forge.IssueRef) string
	IssueComments(ref forge.IssueRef) []forge.Comment
	// RepoLabels lists the repository's label names, sorted.
	RepoLabels(repo string) []string
	// LabelColor returns the color ("#rrggbb") of the repository label name, "" when there is
	// none.
	LabelColor(repo, name string) string
	// MergeRequests lists the repository's merge requests by number.
	MergeRequests(repo string) []forge.MergeRequest
}

// Names used by RunConformance.
const (
	// ConformanceRepo is the repository RunConformance seeds.
	ConformanceRepo = "acme/widget"
	// ConformanceCloneURL is the clone URL RunConformance seeds and expects back.
	ConformanceCloneURL = "file:///srv/git/acme/widget.git"
)

// RunConformance runs the behaviour every forge.Forge must show against a fresh forge per
// subtest: newForge returns the forge under test and the Seeder of the same (empty) state.
// Subtests run in parallel. The function is long because it is a list: one independent t.Run
// per clause of the forge.Forge contract, in the order of the interface's methods, so that the
// whole contract reads in one place.
func RunConformance(t *testing.T, newForge func(t *testing.T) (forge.Forge, Seeder)) {
	t.Helper()

	type bundle struct {
		ctx context.Context
		f   forge.Forge
		s   Seeder
		ref forge.IssueRef
	}
	setup := func(t *testing.T) *bundle {
		t.Helper()
		f, s := newForge(t)
		s.AddRepo(ConformanceRepo, "main", ConformanceCloneURL)
		s.AddUser("alice")
		s.AddUser("bob")
		n := s.AddIssue(ConformanceRepo, SeedIssue{
			Title: "Widget is broken", Body: "It broke.", Author: "alice",
			Labels: []string{"bug"}, Assignees: []string{"alice"},
		})
		return &bundle{ctx: t.Context(), f: f, s: s, ref: forge.IssueRef{Forge: "test", Repo: ConformanceRepo, Number: n}}
	}
	missing := func(b *bundle) forge.IssueRef { r := b.ref; r.Number = 9999; return r }

	t.Run("Kind", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.True(t, b.f.Kind().Valid())
	})

	t.Run("BotUser", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		u, err := b.f.BotUser(b.ctx)
		require.NoError(t, err)
		require.Equal(t, b.s.BotLogin(), u.Login)
		require.NotZero(t, u.ID)
	})

	t.Run("Repository", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		r, err := b.f.Repository(b.ctx, ConformanceRepo)
		require.NoError(t, err)
		require.Equal(t, forge.Repository{Path: ConformanceRepo, DefaultBranch: "main", CloneURL: ConformanceCloneURL}, *r)
		_, err = b.f.Repository(b.ctx, "acme/nope")
		require.ErrorIs(t, err, forge.ErrNotFound)
	})

	t.Run("IssueRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		is, err := b.f.Issue(b.ctx, b.ref)
		require.NoError(t, err)
		require.Equal(t, b.ref, is.Ref)
		require.Equal(t, "Widget is broken", is.Title)
		require.Equal(t, "It broke.", is.Body)
		require.Equal(t, "open", is.State)
		require.Equal(t, "alice", is.Author.Login)
		require.Equal(t, []string{"bug"}, is.Labels)
		require.Equal(t, []string{"alice"}, is.Assignees)
	})

	t.Run("IssueNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.f.Issue(b.ctx, missing(b))
		require.ErrorIs(t, err, forge.ErrNotFound)
		_, err = b.f.Comments(b.ctx, missing(b))
		require.ErrorIs(t, err, forge.ErrNotFound)
		_, err = b.f.Comment(b.ctx, missing(b), "hello")
		require.ErrorIs(t, err, forge.ErrNotFound)
		require.ErrorIs(t, b.f.SetIssueBody(b.ctx, missing(b), "x"), forge.ErrNotFound)
		require.ErrorIs(t, b.f.SetLabels(b.ctx, missing(b), []string{"bug"}, nil), forge.ErrNotFound)
		require.ErrorIs(t, b.f.SetAssignees(b.ctx, missing(b), []string{"bob"}, nil), forge.ErrNotFound)
		_, err = b.f.Issue(b.ctx, forge.IssueRef{Forge: "test", Repo: "acme/nope", Number: 1})
		require.ErrorIs(t, err, forge.ErrNotFound)
	})

	t.Run("SetIssueBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := "New body\n\n<!-- alfred:state -->"
		require.NoError(t, b.f.SetIssueBody(b.ctx, b.ref, body))
		require.Equal(t, body, b.s.IssueBody(b.ref))
		is, err := b.f.Issue(b.ctx, b.ref)
		require.NoError(t, err)
		require.Equal(t, body, is.Body)
		require.Equal(t, "Widget is broken", is.Title, "the title must not change")
	})

	t.Run("CommentsAcrossPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.s.SetPageSize(2)
		first := b.s.AddComment(b.ref, "alice", "first, by a human")
		ids := []int64{first}
		for i := range 4 {
			id, err := b.f.Comment(b.ctx, b.ref, fmt.Sprintf("bot comment %d", i))
			require.NoError(t, err)
			require.NotZero(t, id)
			ids = append(ids, id)
		}
		got, err := b.f.Comments(b.ctx, b.ref)
		require.NoError(t, err)
		require.Len(t, got, 5, "every page must be read")
		var gotIDs []int64
		for _, c := range got {
			gotIDs = append(gotIDs, c.ID)
		}
		require.Equal(t, ids, gotIDs, "oldest first")
		require.Equal(t, "first, by a human", got[0].Body)
		require.Equal(t, "alice", got[0].Author.Login)
		require.Equal(t, b.s.BotLogin(), got[4].Author.Login)
		require.Equal(t, "bot comment 3", got[4].Body)
		require.False(t, got[0].CreatedAt.IsZero())
		require.Len(t, b.s.IssueComments(b.ref), 5)
	})

	t.Run("EditComment", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, err := b.f.Comment(b.ctx, b.ref, "- [ ] yes\n- [ ] no")
		require.NoError(t, err)
		require.NoError(t, b.f.EditComment(b.ctx, b.ref, id, "- [x] yes\n- [ ] no"))
		got := b.s.IssueComments(b.ref)
		require.Len(t, got, 1)
		require.Equal(t, id, got[0].ID)
		require.Equal(t, "- [x] yes\n- [ ] no", got[0].Body)
		require.ErrorIs(t, b.f.EditComment(b.ctx, b.ref, 987654, "x"), forge.ErrNotFound)
	})

	t.Run("CommentOnMergeRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mr, err := b.f.CreateMergeRequest(b.ctx, ConformanceRepo, forge.NewMergeRequest{SourceBranch: "alfred/1", Title: "Fix it"})
		require.NoError(t, err)
		ref := forge.IssueRef{Forge: "test", Repo: ConformanceRepo, Number: mr.Number, MergeRequest: true}
		id, err := b.f.Comment(b.ctx, ref, "CI is green")
		require.NoError(t, err)
		require.NoError(t, b.f.EditComment(b.ctx, ref, id, "CI is green, merging"))
		got, err := b.f.Comments(b.ctx, ref)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "CI is green, merging", got[0].Body)
	})

	t.Run("Labels", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, l := range []string{"a", "b", "c", "status::waiting_info"} {
			b.s.AddLabel(ConformanceRepo, l)
		}
		b.s.SetPageSize(2) // label lookups must read every page
		require.NoError(t, b.f.SetLabels(b.ctx, b.ref, []string{"status::waiting_info", "triage"}, []string{"wontfix"}))
		require.Equal(t, []string{"bug", "status::waiting_info", "triage"}, b.s.IssueLabels(b.ref))
		require.Equal(t, []string{"a", "b", "bug", "c", "status::waiting_info", "triage"}, b.s.RepoLabels(ConformanceRepo),
			"a missing label is created once, an existing one is reused")

		require.NoError(t, b.f.SetLabels(b.ctx, b.ref, nil, []string{"bug", "status::waiting_info"}))
		require.Equal(t, []string{"triage"}, b.s.IssueLabels(b.ref))

		// Idempotent: adding a present label and removing an absent one change nothing.
		require.NoError(t, b.f.SetLabels(b.ctx, b.ref, []string{"triage"}, []string{"bug"}))
		require.Equal(t, []string{"triage"}, b.s.IssueLabels(b.ref))
		require.NoError(t, b.f.SetLabels(b.ctx, b.ref, nil, nil))

		is, err := b.f.Issue(b.ctx, b.ref)
		require.NoError(t, err)
		require.Equal(t, []string{"triage"}, is.Labels)
	})

	t.Run("EnsureLabelsCreatesMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, l := range []string{"a", "b", "c"} {
			b.s.AddLabel(ConformanceRepo, l)
		}
		b.s.SetPageSize(2) // label lookups must read every page
		require.NoError(t, b.f.EnsureLabels(b.ctx, ConformanceRepo,
			[]string{"ai::validate_plan", "type::task", "", "ai::validate_plan", "c"}))
		require.Equal(t, []string{"a", "ai::validate_plan", "b", "bug", "c", "type::task"}, b.s.RepoLabels(ConformanceRepo),
			"missing labels are created once, with their scoped names as given")
		require.Equal(t, DefaultLabelColor, b.s.LabelColor(ConformanceRepo, "ai::validate_plan"))
		require.Equal(t, DefaultLabelColor, b.s.LabelColor(ConformanceRepo, "type::task"))
		require.Equal(t, []string{"bug"}, b.s.IssueLabels(b.ref), "no issue is labelled")

		// SetLabels uses an ensured label instead of creating another.
		require.NoError(t, b.f.SetLabels(b.ctx, b.ref, []string{"type::task"}, nil))
		require.Equal(t, []string{"bug", "type::task"}, b.s.IssueLabels(b.ref))
		require.Equal(t, []string{"a", "ai::validate_plan", "b", "bug", "c", "type::task"}, b.s.RepoLabels(ConformanceRepo))

		require.ErrorIs(t, b.f.EnsureLabels(b.ctx, "acme/nope", []string{"x"}), forge.ErrNotFound)
	})

	t.Run("EnsureLabelsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.s.SetPageSize(1)
		names := []string{"status::done", "ai::validate_plan", "bug"}
		want := []string{"ai::validate_plan", "bug", "status::done"}
		for range 3 {
			require.NoError(t, b.f.EnsureLabels(b.ctx, ConformanceRepo, names))
			require.Equal(t, want, b.s.RepoLabels(ConformanceRepo), "a second call creates nothing")
		}
		require.NoError(t, b.f.EnsureLabels(b.ctx, ConformanceRepo, nil))
		require.NoError(t, b.f.EnsureLabels(b.ctx, ConformanceRepo, []string{}))
		require.Equal(t, want, b.s.RepoLabels(ConformanceRepo))
	})

	t.Run("EnsureLabelsLeavesExisting", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.s.AddLabelWithColor(ConformanceRepo, "type::task", "#aa3300")
		b.s.AddLabelWithColor(ConformanceRepo, "ai::validate_plan", "#00aa33")
		b.s.SetPageSize(2)
		require.NoError(t, b.f.EnsureLabels(b.ctx, ConformanceRepo, []string{"type::task", "ai::validate_plan", "status::done"}))
		require.Equal(t, []string{"ai::validate_plan", "bug", "status::done", "type::task"}, b.s.RepoLabels(ConformanceRepo))
		require.Equal(t, "#aa3300", b.s.LabelColor(ConformanceRepo, "type::task"), "an existing label keeps its color")
		require.Equal(t, "#00aa33", b.s.LabelColor(ConformanceRepo, "ai::validate_plan"))
		require.Equal(t, DefaultLabelColor, b.s.LabelColor(ConformanceRepo, "bug"))
		require.Equal(t, DefaultLabelColor, b.s.LabelColor(ConformanceRepo, "status::done"))
	})

	t.Run("Assignees", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.f.SetAssignees(b.ctx, b.ref, []string{"bob"}, nil))
		require.Equal(t, []string{"alice", "bob"}, b.s.IssueAssignees(b.ref))
		require.NoError(t, b.f.SetAssignees(b.ctx, b.ref, []string{"bob"}, []string{"alice", "carol"}))
		require.Equal(t, []string{"bob"}, b.s.IssueAssignees(b.ref))
		require.NoError(t, b.f.SetAssignees(b.ctx, b.ref, nil, []string{"bob"}))
		require.Equal(t, []string{}, b.s.IssueAssignees(b.ref))
		require.NoError(t, b.f.SetAssignees(b.ctx, b.ref, []string{b.s.BotLogin(), "alice"}, nil))
		is, err := b.f.Issue(b.ctx, b.ref)
		require.NoError(t, err)
		got := slices.Sorted(slices.Values(is.Assignees))
		require.Equal(t, slices.Sorted(slices.Values([]string{b.s.BotLogin(), "alice"})), got)
		require.ErrorIs(t, b.f.SetAssignees(b.ctx, b.ref, []string{"nobody-by-that-name"}, nil), forge.ErrNotFound)
	})

	t.Run("MergeRequestIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		nm := forge.NewMergeRequest{SourceBranch: "alfred/issue-1", Title: "Fix widget", Body: "Closes #1"}
		mr1, err := b.f.CreateMergeRequest(b.ctx, ConformanceRepo, nm)
		require.NoError(t, err)
		require.NotZero(t, mr1.Number)
		require.Equal(t, "open", mr1.State)
		require.Equal(t, "main", mr1.TargetBranch, "an empty target is the default branch")
		mr2, err := b.f.CreateMergeRequest(b.ctx, ConformanceRepo, nm)
		require.NoError(t, err)
		require.Equal(t, mr1.Number, mr2.Number, "one open merge request per source branch")
		other, err := b.f.CreateMergeRequest(b.ctx, ConformanceRepo, forge.NewMergeRequest{SourceBranch: "alfred/issue-2", TargetBranch: "main", Title: "Other"})
		require.NoError(t, err)
		require.NotEqual(t, mr1.Number, other.Number)
		require.Len(t, b.s.MergeRequests(ConformanceRepo), 2)

		got, err := b.f.MergeRequest(b.ctx, ConformanceRepo, mr1.Number)
		require.NoError(t, err)
		require.Equal(t, "alfred/issue-1", got.SourceBranch)
		require.Equal(t, "Fix widget", got.Title)
		require.Equal(t, "Closes #1", got.Body)
		require.Equal(t, "open", got.State)
		require.False(t, got.Merged)
		require.NotEmpty(t, got.HeadSHA)
		require.Equal(t, b.s.BotLogin(), got.Author.Login)

		b.s.MarkMerged(ConformanceRepo, mr1.Number)
		got, err = b.f.MergeRequest(b.ctx, ConformanceRepo, mr1.Number)
		require.NoError(t, err)
		require.Equal(t, "merged", got.State)
		require.True(t, got.Merged)

		again, err := b.f.CreateMergeRequest(b.ctx, ConformanceRepo, nm)
		require.NoError(t, err)
		require.NotEqual(t, mr1.Number, again.Number, "a merged one is not reused")

		_, err = b.f.MergeRequest(b.ctx, ConformanceRepo, 9999)
		require.ErrorIs(t, err, forge.ErrNotFound)
	})

	t.Run("CIStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const none, pending, green, red = "0000000000000000000000000000000000000001",
			"0000000000000000000000000000000000000002", "0000000000000000000000000000000000000003",
			"0000000000000000000000000000000000000004"
		b.s.SetCI(ConformanceRepo, pending, CIJob{Name: "build", State: forge.CISuccess}, CIJob{Name: "test", State: forge.CIPending})
		b.s.SetCI(ConformanceRepo, green, CIJob{Name: "build", State: forge.CISuccess}, CIJob{Name: "test", State: forge.CISuccess})
		b.s.SetCI(ConformanceRepo, red, CIJob{Name: "build", State: forge.CISuccess})
		b.s.SetCI(ConformanceRepo, red, CIJob{Name: "build", State: forge.CISuccess},
			CIJob{Name: "test", State: forge.CIFailed, Log: "boom: 3 tests failed", WebURL: "https://ci.example/jobs/7"})

		p, err := b.f.CIStatus(b.ctx, ConformanceRepo, none)
		require.NoError(t, err)
		require.Equal(t, forge.CINone, p.State)

		// No commit: not the project's latest pipeline (GitLab ignores an empty sha filter).
		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, "")
		require.NoError(t, err)
		require.Equal(t, forge.CINone, p.State, "no commit, no CI")

		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, pending)
		require.NoError(t, err)
		require.Equal(t, forge.CIPending, p.State)
		require.Empty(t, p.FailedJobs)

		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, green)
		require.NoError(t, err)
		require.Equal(t, forge.CISuccess, p.State)

		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, red)
		require.NoError(t, err)
		require.Equal(t, forge.CIFailed, p.State, "the latest run counts")
		require.Len(t, p.FailedJobs, 1)
		require.Equal(t, "test", p.FailedJobs[0].Name)
		require.Contains(t, p.FailedJobs[0].Log, "boom: 3 tests failed")
	})

	// A commit with more statuses than a page of Forgejo's combined status (30 by default,
	// whose state Forgejo computes over that page only) or jobs: a failure past the first page
	// still fails CI.
	t.Run("CIStatusManyJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const sha = "00000000000000000000000000000000000000c1"
		var jobs []CIJob
		for i := range 60 {
			jobs = append(jobs, CIJob{Name: fmt.Sprintf("matrix-%02d", i), State: forge.CISuccess})
		}
		jobs[0] = CIJob{Name: "matrix-00", State: forge.CIFailed, Log: "the first job failed"}
		jobs[59] = CIJob{Name: "matrix-59", State: forge.CIPending}
		b.s.SetCI(ConformanceRepo, sha, jobs...)
		p, err := b.f.CIStatus(b.ctx, ConformanceRepo, sha)
		require.NoError(t, err)
		require.Equal(t, forge.CIFailed, p.State)
		require.Len(t, p.FailedJobs, 1)
		require.Equal(t, "matrix-00", p.FailedJobs[0].Name)

		const pending = "00000000000000000000000000000000000000c2"
		jobs[0] = CIJob{Name: "matrix-00", State: forge.CIPending}
		jobs[59] = CIJob{Name: "matrix-59", State: forge.CISuccess}
		b.s.SetCI(ConformanceRepo, pending, jobs...)
		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, pending)
		require.NoError(t, err)
		require.Equal(t, forge.CIPending, p.State, "the first of sixty jobs still runs")
	})

	// GitLab's merged-results pipelines (and merge trains) run on a merge commit of the head
	// into the target branch: no pipeline has the head's sha, the merge request's
	// head_pipeline is that one.
	t.Run("CIStatusMergedResults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if b.f.Kind() != forge.KindGitLab {
			t.Skip("merged-results pipelines are GitLab's")
		}
		const head, next = "00000000000000000000000000000000000000a1", "00000000000000000000000000000000000000a2"
		b.s.SetBranch(ConformanceRepo, "alfred/issue-1", head)
		mr, err := b.f.CreateMergeRequest(b.ctx, ConformanceRepo, forge.NewMergeRequest{SourceBranch: "alfred/issue-1", Title: "Fix widget"})
		require.NoError(t, err)
		p, err := b.f.CIStatus(b.ctx, ConformanceRepo, head)
		require.NoError(t, err)
		require.Equal(t, forge.CINone, p.State, "no pipeline yet")

		id, merge := b.s.AddMergedResultsPipeline(ConformanceRepo, mr.Number, "",
			CIJob{Name: "build", State: forge.CISuccess},
			CIJob{Name: "test", State: forge.CIFailed, Log: "merged with main: 1 test failed"})
		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, head)
		require.NoError(t, err)
		require.Equal(t, forge.CIFailed, p.State, "the merged-results pipeline of the head counts")
		require.Equal(t, id, p.ID)
		require.Equal(t, merge, p.SHA, "it ran on the merge commit")
		require.Len(t, p.FailedJobs, 1)
		require.Contains(t, p.FailedJobs[0].Log, "merged with main: 1 test failed")

		b.s.SetBranch(ConformanceRepo, "alfred/issue-1", next) // a new head: that pipeline is not its
		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, next)
		require.NoError(t, err)
		require.Equal(t, forge.CINone, p.State)
		b.s.SetCI(ConformanceRepo, next, CIJob{Name: "build", State: forge.CISuccess})
		p, err = b.f.CIStatus(b.ctx, ConformanceRepo, next)
		require.NoError(t, err)
		require.Equal(t, forge.CISuccess, p.State, "a pipeline of the head itself")
	})

	// A GitLab parent pipeline whose trigger job started a child pipeline (trigger: include,
	// strategy: depend) fails with that trigger job, a bridge: its failed jobs are the child's.
	t.Run("CIStatusChildPipeline", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if b.f.Kind() != forge.KindGitLab {
			t.Skip("child pipelines are GitLab's")
		}
		const sha = "00000000000000000000000000000000000000b1"
		b.s.SetCI(ConformanceRepo, sha, CIJob{Name: "build", State: forge.CISuccess},
			CIJob{Name: "lint", State: forge.CIFailed, Log: "lint: 2 warnings are errors"},
			CIJob{Name: "run-child", State: forge.CIFailed, Child: []CIJob{
				{Name: "unit", State: forge.CISuccess},
				{Name: "e2e", State: forge.CIFailed, Log: "child: e2e timed out"}}})
		p, err := b.f.CIStatus(b.ctx, ConformanceRepo, sha)
		require.NoError(t, err)
		require.Equal(t, forge.CIFailed, p.State)
		names := map[string]string{}
		for _, j := range p.FailedJobs {
			names[j.Name] = j.Log
		}
		require.Len(t, names, 2, "%v", p.FailedJobs)
		require.Contains(t, names["lint"], "lint: 2 warnings are errors")
		require.Contains(t, names["run-child / e2e"], "child: e2e timed out")
	})

	t.Run("Role", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.s.SetAccessLevel(ConformanceRepo, "guest", 10)
		b.s.SetAccessLevel(ConformanceRepo, "reporter", 20)
		b.s.SetAccessLevel(ConformanceRepo, "developer", 30)
		b.s.SetAccessLevel(ConformanceRepo, "maintainer", 40)
		b.s.SetAccessLevel(ConformanceRepo, "owner", 50)
		b.s.AddTeam(ConformanceRepo, "triage", map[string]string{"repo.issues": "write", "repo.code": "read"}, "triager")
		b.s.AddUser("stranger")
		want := map[string]forge.Role{ // GitLab: access levels; no membership is no role
			"guest": forge.RoleRead, "reporter": forge.RoleTriage, "developer": forge.RoleWrite,
			"maintainer": forge.RoleAdmin, "owner": forge.RoleAdmin, "triager": forge.RoleNone,
			"stranger": forge.RoleNone, "ghost-no-account": forge.RoleNone,
		}
		if b.f.Kind() == forge.KindForgejo { // Forgejo: everyone reads a public repository
			want["guest"], want["reporter"], want["triager"], want["stranger"] = forge.RoleRead, forge.RoleRead, forge.RoleTriage, forge.RoleRead
			want["acme"] = forge.RoleAdmin // the repository's owner
		}
		for login, role := range want {
			got, err := b.f.Role(b.ctx, ConformanceRepo, login)
			require.NoError(t, err, login)
			require.Equal(t, role.String(), got.String(), login)
		}
		_, err := b.f.Role(b.ctx, "acme/nope", "developer")
		require.ErrorIs(t, err, forge.ErrNotFound)
	})

	t.Run("RateLimitRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.s.RateLimitNext(2)
		is, err := b.f.Issue(b.ctx, b.ref)
		require.NoError(t, err)
		require.Equal(t, "Widget is broken", is.Title)
		require.Equal(t, 2, b.s.RateLimited())
	})

	runReconcileConformance(t, func(t *testing.T) (forge.Forge, Seeder, forge.IssueRef) {
		b := setup(t)
		return b.f, b.s, b.ref
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				_, err := b.f.Comment(b.ctx, b.ref, fmt.Sprintf("comment %d", i))
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		got, err := b.f.Comments(b.ctx, b.ref)
		require.NoError(t, err)
		require.Len(t, got, 8)
	})
}
