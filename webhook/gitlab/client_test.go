package gitlab_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

func newClient(t testing.TB, s *forgetest.GitLabServer, token string) *gitlab.Client {
	t.Helper()
	c, err := gitlab.NewClient(gitlab.ClientConfig{
		BaseURL: s.URL, Token: token, MaxRetries: 3,
		RetryWaitMin: time.Millisecond, RetryWaitMax: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	return c
}

func TestClientConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunConformance(t, func(t *testing.T) (forge.Forge, forgetest.Seeder) {
		s := forgetest.NewGitLabServer(t)
		return newClient(t, s, s.Token), s
	})
}

type bundle struct {
	s   *forgetest.GitLabServer
	c   *gitlab.Client
	ref forge.IssueRef
}

func setup(t *testing.T) *bundle {
	t.Helper()
	s := forgetest.NewGitLabServer(t)
	s.AddRepo("grp/sub/proj", "main", "https://gitlab.example/grp/sub/proj.git")
	n := s.AddIssue("grp/sub/proj", forgetest.SeedIssue{Title: "t", Body: "b"})
	return &bundle{s: s, c: newClient(t, s, s.Token), ref: forge.IssueRef{Forge: "gl", Repo: "grp/sub/proj", Number: n}}
}

func TestClientNestedProjectPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, err := b.c.Repository(t.Context(), "grp/sub/proj")
	require.NoError(t, err)
	require.Equal(t, "grp/sub/proj", r.Path)
	require.Contains(t, strings.Join(b.s.Requests(), "\n"), "/api/v4/projects/grp%2Fsub%2Fproj")
}

func TestClientCommentsSkipSystemNotes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.SetPageSize(1)
	b.s.AddComment(b.ref, "alice", "one")
	b.s.AddSystemNote(b.ref, "added ~bug label")
	b.s.AddComment(b.ref, "bob", "two")
	got, err := b.c.Comments(t.Context(), b.ref)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "one", got[0].Body)
	require.Equal(t, "two", got[1].Body)
}

func TestClientCIStates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := map[string]forge.CIState{
		"canceled": forge.CICanceled, "canceling": forge.CICanceled, "manual": forge.CISkipped, "skipped": forge.CISkipped,
		"created": forge.CIPending, "waiting_for_resource": forge.CIPending, "success": forge.CISuccess,
	}
	for status, want := range cases {
		sha := strings.Repeat("a", 30) + status[:min(len(status), 10)]
		b.s.AddPipeline("grp/sub/proj", sha, "refs/merge-requests/7/head", status)
		p, err := b.c.CIStatus(t.Context(), "grp/sub/proj", sha)
		require.NoError(t, err, status)
		require.Equal(t, want, p.State, status)
		require.Equal(t, int64(7), p.MergeRequest, status)
	}
}

func TestClientCIFailedKeepsLogTail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := strings.Repeat("x", 10_000) + "\nFAIL: TestWidget\n"
	b.s.SetCI("grp/sub/proj", "abc", forgetest.CIJob{Name: "unit", State: forge.CIFailed, Log: long},
		forgetest.CIJob{Name: "lint", State: forge.CISuccess})
	p, err := b.c.CIStatus(t.Context(), "grp/sub/proj", "abc")
	require.NoError(t, err)
	require.Equal(t, forge.CIFailed, p.State)
	require.Len(t, p.FailedJobs, 1)
	require.Equal(t, "unit", p.FailedJobs[0].Name)
	require.Len(t, p.FailedJobs[0].Log, gitlab.LogTailBytes)
	require.True(t, strings.HasSuffix(p.FailedJobs[0].Log, "FAIL: TestWidget\n"))
}

func TestClientRetries5xxAndHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.FailNext(http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusRequestTimeout)
	_, err := b.c.Issue(t.Context(), b.ref)
	require.NoError(t, err)

	b.s.FailNext(http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway)
	_, err = b.c.Issue(t.Context(), b.ref)
	require.Error(t, err, "retries are bounded by MaxRetries")
	require.Contains(t, err.Error(), "502")

}

func TestClientHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.SetRetryAfter(1)
	b.s.RateLimitNext(1)
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: b.s.URL, Token: b.s.Token, RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Second})
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Issue(t.Context(), b.ref)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "Retry-After: 1 must be waited for")

	// RetryWaitMax caps a longer Retry-After.
	b.s.SetRetryAfter(60)
	b.s.RateLimitNext(1)
	start = time.Now()
	_, err = b.c.Issue(t.Context(), b.ref) // RetryWaitMax 20ms
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, 2, b.s.RateLimited())
}

func TestClientErrorsNeverContainToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const wrong = "glpat-wrong-secret-123"
	c := newClient(t, b.s, wrong)
	_, err := c.BotUser(t.Context())
	require.ErrorIs(t, err, forge.ErrForbidden)
	require.NotContains(t, err.Error(), wrong)
	require.NotContains(t, err.Error(), b.s.Token)

	_, err = b.c.Issue(t.Context(), forge.IssueRef{Repo: "grp/sub/proj", Number: 99})
	require.ErrorIs(t, err, forge.ErrNotFound)
	require.NotContains(t, err.Error(), b.s.Token)

	// A server that echoes the token in its error body and in Link headers.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"message":"bad token ` + r.Header.Get("Private-Token") + `"}`))
	}))
	t.Cleanup(echo.Close)
	c, err = gitlab.NewClient(gitlab.ClientConfig{BaseURL: echo.URL, Token: "s3cr3t-token-value", MaxRetries: -1})
	require.NoError(t, err)
	err = c.SetIssueBody(t.Context(), forge.IssueRef{Repo: "a/b", Number: 1}, "x")
	require.ErrorIs(t, err, forge.ErrConflict)
	require.NotContains(t, err.Error(), "s3cr3t-token-value")
	require.Contains(t, err.Error(), "bad token [redacted]")
}

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	_, err := gitlab.NewClient(gitlab.ClientConfig{Token: "x"})
	require.Error(t, err)
	_, err = gitlab.NewClient(gitlab.ClientConfig{BaseURL: "https://gitlab.example"})
	require.Error(t, err)
}

func TestClientCreateMRConflictReturnsExisting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := b.s.AddMergeRequest("grp/sub/proj", "feat", "main", "Existing", "")
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: b.s.URL, Token: b.s.Token, HTTPClient: &http.Client{Transport: forgetest.EmptyFirstList("/merge_requests")}})
	require.NoError(t, err)
	got, err := c.CreateMergeRequest(t.Context(), "grp/sub/proj", forge.NewMergeRequest{SourceBranch: "feat", TargetBranch: "main", Title: "New"})
	require.NoError(t, err)
	require.Equal(t, n, got.Number)
	require.Contains(t, strings.Join(b.s.Requests(), "\n"), "POST /api/v4/projects/grp%2Fsub%2Fproj/merge_requests", "the 409 path was taken")
	require.Len(t, b.s.MergeRequests("grp/sub/proj"), 1)
}

func TestClientEnsureLabelsCountsGroupLabels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.AddOrgLabel("grp", "type::task")
	b.s.AddOrgLabel("grp/sub", "ai::validate_plan")
	b.s.AddOrgLabel("other", "status::done") // not an ancestor of grp/sub/proj
	b.s.AddLabel("grp/sub/proj", "bug")
	b.s.SetPageSize(1)
	require.NoError(t, b.c.EnsureLabels(t.Context(), "grp/sub/proj", []string{"type::task", "ai::validate_plan", "bug", "status::done"}))
	require.Equal(t, []string{"bug", "status::done"}, b.s.RepoLabels("grp/sub/proj"), "labels of ancestor groups count as existing")

	var lists, creates int
	for _, r := range b.s.Requests() {
		switch {
		case strings.HasPrefix(r, "GET /api/v4/projects/grp%2Fsub%2Fproj/labels?"):
			lists++
			require.Contains(t, r, "include_ancestor_groups=true")
		case strings.HasPrefix(r, "POST /api/v4/projects/grp%2Fsub%2Fproj/labels"):
			creates++
		}
	}
	require.Equal(t, 3, lists, "every page of bug, type::task, ai::validate_plan is read")
	require.Equal(t, 1, creates, "only the missing label is created")

	require.NoError(t, b.c.SetLabels(t.Context(), b.ref, []string{"type::task"}, nil))
	require.Equal(t, []string{"type::task"}, b.s.IssueLabels(b.ref))
	require.Equal(t, []string{"bug", "status::done"}, b.s.RepoLabels("grp/sub/proj"), "a group label is not copied into the project")
}

func TestClientEnsureLabelsConflictIsSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.AddLabelWithColor("grp/sub/proj", "type::task", "#aa3300")
	b.s.AddOrgLabel("grp", "ai::validate_plan")
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: b.s.URL, Token: b.s.Token, HTTPClient: &http.Client{Transport: forgetest.EmptyFirstList("/labels")}})
	require.NoError(t, err)
	require.NoError(t, c.EnsureLabels(t.Context(), "grp/sub/proj", []string{"type::task", "ai::validate_plan", "status::done"}))
	require.Equal(t, []string{"status::done", "type::task"}, b.s.RepoLabels("grp/sub/proj"))
	require.Equal(t, "#aa3300", b.s.LabelColor("grp/sub/proj", "type::task"))
	var creates int
	for _, r := range b.s.Requests() {
		if strings.HasPrefix(r, "POST /api/v4/projects/grp%2Fsub%2Fproj/labels") {
			creates++
		}
	}
	require.Equal(t, 3, creates, "the 409 path was taken for the two existing labels")
}
