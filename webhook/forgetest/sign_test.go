package forgetest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

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
