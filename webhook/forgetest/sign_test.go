package forgetest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestLoadFixtureAndSignForgejo(t *testing.T) {
	t.Parallel()
	// NNN.headers next to NNN.json, with a request line: the live captures.
	h, body, err := forgetest.LoadFixture(filepath.Join(forgetest.FixtureDir(t, forge.KindForgejo), "forgejo-live", "001-issues-opened.json"))
	require.NoError(t, err)
	assert.Len(t, body, 5431)
	assert.Equal(t, "issues", h.Get("X-Forgejo-Event-Type"))
	assert.Equal(t, "782b5c21-dcb6-4d9c-a85d-933d4a07a2ae", h.Get("X-Forgejo-Delivery"))
	assert.Empty(t, h.Get("POST /webhooks/forgejo HTTP/1.1"))
	assert.Equal(t, h.Get("X-Forgejo-Signature"), forgejo.Sign("acceptance-webhook-secret", body))

	// X.json.headers without a request line.
	h, body, err = forgetest.LoadFixture(filepath.Join(forgetest.FixtureDir(t, forge.KindForgejo), "gitea", "issues_opened.json"))
	require.NoError(t, err)
	assert.Equal(t, "issues", h.Get("X-Gitea-Event"))
	assert.Equal(t, h.Get("X-Gitea-Signature"), forgejo.Sign("IsWishesWereHorsesWedAllBeEatingSteak!", body))

	// No headers file.
	h, _, err = forgetest.LoadFixture(filepath.Join(forgetest.FixtureDir(t, forge.KindGitLab), "push_hook.json"))
	require.NoError(t, err)
	assert.Empty(t, h)

	_, _, err = forgetest.LoadFixture(filepath.Join(t.TempDir(), "missing.json"))
	assert.Error(t, err)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.headers"), []byte("no colon here\n"), 0o600))
	_, _, err = forgetest.LoadFixture(filepath.Join(dir, "x.json"))
	assert.Error(t, err)
}

func TestNewRequests(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	r := forgetest.NewForgejoRequest("http://localhost:8080/webhooks/forgejo", "pull_request_review_approved", "d-1", "s", body)
	assert.Equal(t, http.MethodPost, r.Method)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Equal(t, "pull_request_review_approved", r.Header.Get("X-Forgejo-Event-Type"))
	assert.Equal(t, "pull_request_approved", r.Header.Get("X-Gitea-Event"))
	assert.Equal(t, "d-1", r.Header.Get("X-Gitea-Delivery"))
	sig := forgejo.Sign("s", body)
	assert.Equal(t, sig, r.Header.Get("X-Forgejo-Signature"))
	assert.Equal(t, "sha256="+sig, r.Header.Get("X-Hub-Signature-256"))
	assert.Equal(t, int64(len(body)), r.ContentLength)

	r = forgetest.NewForgejoRequest("/", "issues", "", "", body)
	assert.Empty(t, r.Header.Get("X-Forgejo-Signature"))
	assert.Empty(t, r.Header.Get("X-Forgejo-Delivery"))

	r = forgetest.NewGitLabRequest("/webhooks/gitlab", "Issue Hook", "k", "tok", body)
	assert.Equal(t, "Issue Hook", r.Header.Get("X-Gitlab-Event"))
	assert.Equal(t, "tok", r.Header.Get("X-Gitlab-Token"))
	assert.Equal(t, "k", r.Header.Get("Idempotency-Key"))
	assert.Equal(t, "k", r.Header.Get("X-Gitlab-Event-UUID"))

	for in, want := range map[string]string{
		"issue_label": "issues", "pull_request_comment": "issue_comment", "pull_request_sync": "pull_request",
		"pull_request_review_comment": "pull_request_comment", "push": "push",
	} {
		assert.Equal(t, want, forgetest.ForgejoCoarseEvent(in), in)
	}
}
