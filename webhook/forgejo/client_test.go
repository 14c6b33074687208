package forgejo_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func newClient(t testing.TB, url, token string) *forgejo.Client {
	t.Helper()
	c, err := forgejo.NewClient(forgejo.ClientConfig{
		BaseURL: url, Token: token, MaxRetries: 3,
		RetryWaitMin: time.Millisecond, RetryWaitMax: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	return c
}

func TestClientConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunConformance(t, func(t *testing.T) (forge.Forge, forgetest.Seeder) {
		s := forgetest.NewForgejoServer(t)
		return newClient(t, s.URL, s.Token), s
	})
}

type bundle struct {
	s   *forgetest.ForgejoServer
	c   *forgejo.Client
	ref forge.IssueRef
}

func setup(t *testing.T) *bundle {
	t.Helper()
	s := forgetest.NewForgejoServer(t)
	s.AddRepo("org/proj", "main", "https://forgejo.example/org/proj.git")
	n := s.AddIssue("org/proj", forgetest.SeedIssue{Title: "t", Body: "b"})
	return &bundle{s: s, c: newClient(t, s.URL, s.Token), ref: forge.IssueRef{Forge: "fj", Repo: "org/proj", Number: n}}
}

func TestClientMakesNoVersionProbe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.c.Issue(t.Context(), b.ref)
	require.NoError(t, err)
	for _, r := range b.s.Requests() {
		require.NotContains(t, r, "/version")
	}
}

func TestClientUsesOrganisationLabels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.AddOrgLabel("org", "status::waiting_info")
	require.NoError(t, b.c.SetLabels(t.Context(), b.ref, []string{"status::waiting_info"}, nil))
	require.Equal(t, []string{"status::waiting_info"}, b.s.IssueLabels(b.ref))
	require.Equal(t, []string{}, b.s.RepoLabels("org/proj"), "no repository duplicate of an organisation label")
}

func TestClientPullRequestIsAnIssue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mr, err := b.c.CreateMergeRequest(t.Context(), "org/proj", forge.NewMergeRequest{SourceBranch: "feat", Title: "Feat"})
	require.NoError(t, err)
	require.Equal(t, b.ref.Number+1, mr.Number, "issues and pull requests share the index space")
	ref := forge.IssueRef{Repo: "org/proj", Number: mr.Number, MergeRequest: true}
	require.NoError(t, b.c.SetLabels(t.Context(), ref, []string{"ai::review"}, nil))
	require.Equal(t, []string{"ai::review"}, b.s.IssueLabels(ref))
	_, err = b.c.MergeRequest(t.Context(), "org/proj", b.ref.Number)
	require.ErrorIs(t, err, forge.ErrNotFound, "an issue is not a pull request")
}

func TestClientCreatePullConflictReturnsExisting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n := b.s.AddMergeRequest("org/proj", "feat", "main", "Existing", "")
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: b.s.URL, Token: b.s.Token, HTTPClient: &http.Client{Transport: forgetest.EmptyFirstList("/pulls")}})
	require.NoError(t, err)
	got, err := c.CreateMergeRequest(t.Context(), "org/proj", forge.NewMergeRequest{SourceBranch: "feat", TargetBranch: "main", Title: "New"})
	require.NoError(t, err)
	require.Equal(t, n, got.Number)
	require.Contains(t, strings.Join(b.s.Requests(), "\n"), "POST /api/v1/repos/org/proj/pulls", "the 409 path was taken")
	require.Len(t, b.s.MergeRequests("org/proj"), 1)
}

func TestClientCIFailedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.SetCI("org/proj", "abc", forgetest.CIJob{Name: "ci/build", State: forge.CISuccess},
		forgetest.CIJob{Name: "ci/test", State: forge.CIFailed, Log: "Failing after 12s", WebURL: "https://ci/1"},
		forgetest.CIJob{Name: "ci/lint", State: forge.CIFailed, Log: "Has been cancelled"})
	p, err := b.c.CIStatus(t.Context(), "org/proj", "abc")
	require.NoError(t, err)
	require.Equal(t, forge.CIFailed, p.State)
	require.Equal(t, []forge.FailedJob{
		{Name: "ci/test", WebURL: "https://ci/1", Log: "Failing after 12s"},
		{Name: "ci/lint", Log: "Has been cancelled"},
	}, p.FailedJobs)
}

func TestClientRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.FailNext(http.StatusBadGateway, http.StatusRequestTimeout)
	b.s.RateLimitNext(1)
	_, err := b.c.Issue(t.Context(), b.ref)
	require.NoError(t, err)

	b.s.FailNext(http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway, http.StatusBadGateway)
	_, err = b.c.Issue(t.Context(), b.ref)
	require.Error(t, err, "retries are bounded by MaxRetries")
	require.Contains(t, err.Error(), "502")

	// Retry-After is honoured.
	b.s.SetRetryAfter(1)
	b.s.RateLimitNext(1)
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: b.s.URL, Token: b.s.Token, RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Second})
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Issue(t.Context(), b.ref)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
}

func TestClientErrorsNeverContainToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const wrong = "wrong-secret-token-123"
	_, err := newClient(t, b.s.URL, wrong).BotUser(t.Context())
	require.ErrorIs(t, err, forge.ErrForbidden)
	require.NotContains(t, err.Error(), wrong)

	_, err = b.c.Issue(t.Context(), forge.IssueRef{Repo: "org/proj", Number: 99})
	require.ErrorIs(t, err, forge.ErrNotFound)
	require.NotContains(t, err.Error(), b.s.Token)

	// A server that echoes the token in a non-JSON error body (the SDK quotes such bodies).
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte("bad header " + r.Header.Get("Authorization")))
	}))
	t.Cleanup(echo.Close)
	c := newClient(t, echo.URL, "s3cr3t-token-value")
	err = c.SetIssueBody(t.Context(), forge.IssueRef{Repo: "a/b", Number: 1}, "x")
	require.ErrorIs(t, err, forge.ErrConflict)
	require.NotContains(t, err.Error(), "s3cr3t-token-value")
	require.True(t, strings.Contains(err.Error(), "[redacted]"), err.Error())
}

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []forgejo.ClientConfig{{Token: "x"}, {BaseURL: "https://f.example"}, {BaseURL: "f.example", Token: "x"}} {
		_, err := forgejo.NewClient(cfg)
		require.Error(t, err)
	}
}

func TestClientEnsureLabelsCountsOrganisationLabels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.AddOrgLabel("org", "type::task")
	b.s.SetPageSize(1)
	require.NoError(t, b.c.EnsureLabels(t.Context(), "org/proj", []string{"type::task", "ai::validate_plan"}))
	require.Equal(t, []string{"ai::validate_plan"}, b.s.RepoLabels("org/proj"), "no repository duplicate of an organisation label")
	require.Equal(t, forgejo.LabelColor, b.s.LabelColor("org/proj", "ai::validate_plan"))

	// A user-owned repository: GET /orgs/{owner}/labels answers 404, which is not an error.
	b.s.AddRepo("alice/own", "main", "https://forgejo.example/alice/own.git")
	require.NoError(t, b.c.EnsureLabels(t.Context(), "alice/own", []string{"type::task"}))
	require.Equal(t, []string{"type::task"}, b.s.RepoLabels("alice/own"))

	require.ErrorIs(t, b.c.EnsureLabels(t.Context(), "not-a-path", []string{"x"}), forge.ErrNotFound)
}
