package forgetest

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// NewForgejoRequest builds a POST of body to url as a Forgejo server sends it: Content-Type
// application/json; X-Forgejo-Event-Type and X-Gitea-Event-Type set to eventType (the
// fine-grained type, e.g. "issue_label", "pull_request_comment"); X-Forgejo-Event and
// X-Gitea-Event set to the matching coarse event (e.g. "issues", "issue_comment"); the delivery
// headers X-Forgejo-Delivery and X-Gitea-Delivery when deliveryID is not empty; and, when secret
// is not empty, X-Forgejo-Signature, X-Gitea-Signature and X-Hub-Signature-256 ("sha256="
// prefix) computed as forgejo.Sign does.
//
// The request works both with http.Client.Do and with a handler's ServeHTTP. It panics when url
// cannot be parsed; callers that take url from a user check it with net/url first.
func NewForgejoRequest(url, eventType, deliveryID, secret string, body []byte) *http.Request {
	r := signNewRequest(url, body)
	coarse := ForgejoCoarseEvent(eventType)
	r.Header.Set("X-Forgejo-Event-Type", eventType)
	r.Header.Set("X-Gitea-Event-Type", eventType)
	r.Header.Set("X-Forgejo-Event", coarse)
	r.Header.Set("X-Gitea-Event", coarse)
	if deliveryID != "" {
		r.Header.Set("X-Forgejo-Delivery", deliveryID)
		r.Header.Set("X-Gitea-Delivery", deliveryID)
	}
	if secret != "" {
		sig := forgehttp.Sign(secret, body)
		r.Header.Set("X-Forgejo-Signature", sig)
		r.Header.Set("X-Gitea-Signature", sig)
		r.Header.Set("X-Hub-Signature-256", "sha256="+sig)
	}
	return r
}

// ForgejoCoarseEvent returns the X-Forgejo-Event / X-Gitea-Event value Forgejo and Gitea send
// with a fine-grained event type (Gitea modules/webhook/type.go, Event()): issue_* give
// "issues", pull_request_comment gives "issue_comment", pull_request_review_approved gives
// "pull_request_approved", pull_request_review_rejected gives "pull_request_rejected",
// pull_request_review_comment gives "pull_request_comment", the other pull_request_* give
// "pull_request"; any other type is returned unchanged.
func ForgejoCoarseEvent(eventType string) string {
	switch eventType {
	case "issue_assign", "issue_label", "issue_milestone":
		return "issues"
	case "pull_request_comment":
		return "issue_comment"
	case "pull_request_review_approved":
		return "pull_request_approved"
	case "pull_request_review_rejected":
		return "pull_request_rejected"
	case "pull_request_review_comment":
		return "pull_request_comment"
	case "pull_request_assign", "pull_request_label", "pull_request_milestone", "pull_request_sync",
		"pull_request_review_request":
		return "pull_request"
	default:
		return eventType
	}
}

// NewGitLabRequest builds a POST of body to url as GitLab sends it: Content-Type
// application/json; X-Gitlab-Event set to eventHeader (e.g. "Issue Hook"); X-Gitlab-Token set to
// token when it is not empty; Idempotency-Key and X-Gitlab-Event-UUID set to deliveryID when it
// is not empty.
//
// The request works both with http.Client.Do and with a handler's ServeHTTP. It panics when url
// cannot be parsed; callers that take url from a user check it with net/url first.
func NewGitLabRequest(url, eventHeader, deliveryID, token string, body []byte) *http.Request {
	r := signNewRequest(url, body)
	r.Header.Set("X-Gitlab-Event", eventHeader)
	if token != "" {
		r.Header.Set("X-Gitlab-Token", token)
	}
	if deliveryID != "" {
		r.Header.Set("Idempotency-Key", deliveryID)
		r.Header.Set("X-Gitlab-Event-UUID", deliveryID)
	}
	return r
}

func signNewRequest(url string, body []byte) *http.Request {
	r, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		panic(fmt.Sprintf("forgetest: building request: %v", err))
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}
