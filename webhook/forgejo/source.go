package forgejo

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// Forgejo and Gitea webhook request headers. Sources: Forgejo services/webhook/default.go and
// Gitea services/webhook/deliver.go (addDefaultHeaders). Forgejo sends both the X-Forgejo-* and
// the X-Gitea-* sets with the same values; Gitea sends only X-Gitea-*.
const (
	hookHeaderForgejoSignature = "X-Forgejo-Signature" // hex HMAC-SHA256 of the JSON payload
	hookHeaderGiteaSignature   = "X-Gitea-Signature"
	hookHeaderForgejoEventType = "X-Forgejo-Event-Type" // fine-grained: issue_label, pull_request_sync…
	hookHeaderGiteaEventType   = "X-Gitea-Event-Type"
	hookHeaderForgejoEvent     = "X-Forgejo-Event" // coarse: issues, issue_comment, pull_request…
	hookHeaderGiteaEvent       = "X-Gitea-Event"
	hookHeaderForgejoDelivery  = "X-Forgejo-Delivery" // UUID of the hook task; new on a manual redelivery
	hookHeaderGiteaDelivery    = "X-Gitea-Delivery"
)

// SourceConfig configures a Forgejo/Gitea webhook Source.
type SourceConfig struct {
	// Secrets are the accepted webhook secrets (the HMAC-SHA256 keys). More than one lets a
	// secret be rotated. At least one is required; empty strings are rejected (Forgejo sends an
	// empty signature when the hook has no secret, and such deliveries are refused).
	Secrets []string `json:"-"`
}

// String hides the secrets, so printing a config never leaks them.
func (c SourceConfig) String() string {
	return fmt.Sprintf("forgejo.SourceConfig{Secrets: %d x [redacted]}", len(c.Secrets))
}

// Validate reports a configuration the Source cannot run with.
func (c SourceConfig) Validate() error {
	if len(c.Secrets) == 0 {
		return errors.New("forgejo webhook source: no secret configured")
	}
	for i, s := range c.Secrets {
		if s == "" {
			return fmt.Errorf("forgejo webhook source: secret %d is empty", i)
		}
	}
	return nil
}

// Source verifies and parses Forgejo and Gitea webhook deliveries (hook type "forgejo" or
// "gitea", content type application/json or form). It satisfies webhook.Source and is safe for
// concurrent use.
type Source struct {
	secrets [][]byte
}

// NewSource validates cfg and builds a Source.
func NewSource(cfg SourceConfig) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Source{}
	for _, sec := range cfg.Secrets {
		s.secrets = append(s.secrets, []byte(sec))
	}
	return s, nil
}

// Sign returns the signature Forgejo and Gitea send with body when the hook's secret is secret:
// the lowercase hex HMAC-SHA256 of body, without prefix, as carried by X-Forgejo-Signature and
// X-Gitea-Signature. Verify accepts exactly these values; tests and `alfred replay` use it to
// sign deliveries.
func Sign(secret string, body []byte) string { return forgehttp.Sign(secret, body) }

// SignDelivery sets on h what Forgejo sends with body when the hook's secret is secret: both
// signature headers (Sign) and, when deliveryID is not empty, both delivery id headers.
func SignDelivery(h http.Header, secret string, body []byte, deliveryID string) {
	sig := Sign(secret, body)
	h.Set(hookHeaderForgejoSignature, sig)
	h.Set(hookHeaderGiteaSignature, sig)
	if deliveryID != "" {
		h.Set(hookHeaderForgejoDelivery, deliveryID)
		h.Set(hookHeaderGiteaDelivery, deliveryID)
	}
}

// Kind returns forge.KindForgejo (a Gitea server works as Forgejo).
func (s *Source) Kind() forge.Kind { return forge.KindForgejo }

// Verify checks the hex HMAC-SHA256 in X-Forgejo-Signature (else X-Gitea-Signature) against the
// raw JSON payload with every configured secret, using hmac.Equal. A missing, empty, malformed
// or non-matching signature gives an error wrapping forge.ErrSignature that does not contain the
// received value.
func (s *Source) Verify(r *http.Request, body []byte) error {
	sig := forgehttp.FirstHeader(r.Header, hookHeaderForgejoSignature, hookHeaderGiteaSignature)
	if sig == "" {
		return fmt.Errorf("%w: no %s or %s header", forge.ErrSignature, hookHeaderForgejoSignature, hookHeaderGiteaSignature)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: signature is not a hex SHA-256 digest", forge.ErrSignature)
	}
	payload, err := hookPayload(r, body)
	if err != nil {
		return fmt.Errorf("%w: %v", forge.ErrSignature, err)
	}
	ok := false
	for _, secret := range s.secrets {
		ok = hmac.Equal(forgehttp.MAC(secret, payload), got) || ok
	}
	if !ok {
		return fmt.Errorf("%w: signature matches no configured secret", forge.ErrSignature)
	}
	return nil
}

// Parse normalises a delivery. It routes on X-Forgejo-Event-Type / X-Gitea-Event-Type (the
// fine-grained type) and falls back to X-Forgejo-Event / X-Gitea-Event only when no -Type header
// is present (Gogs-era senders, recorded fixtures), then on the body's action and shape.
// DeliveryID is X-Forgejo-Delivery, else X-Gitea-Delivery, else empty (the Receiver then uses
// the body hash).
//
// Mapping: issues opened/edited/closed/reopened; issue_assign and pull_request_assign to
// EventAssignees and issue_label / pull_request_label to EventLabels, both with the full list;
// issue_comment and pull_request_comment created/edited to EventComment / EventCommentEdited;
// pull_request opened/reopened, synchronized, closed (merged or not); reviews to EventReview;
// status to EventPipeline. Milestones, review requests, edited pull requests, deleted comments,
// push, create, delete and the rest are a *forge.IgnoreError.
func (s *Source) Parse(r *http.Request, body []byte) (forge.Event, error) {
	ev := forge.Event{
		Kind:       forge.KindForgejo,
		DeliveryID: forgehttp.FirstHeader(r.Header, hookHeaderForgejoDelivery, hookHeaderGiteaDelivery),
	}
	name := forgehttp.FirstHeader(r.Header, hookHeaderForgejoEventType, hookHeaderGiteaEventType)
	fine := name != ""
	if !fine {
		name = forgehttp.FirstHeader(r.Header, hookHeaderForgejoEvent, hookHeaderGiteaEvent)
	}
	ev.Header = name
	if name == "" {
		return ev, fmt.Errorf("%w: no %s or %s header", forge.ErrBadPayload, hookHeaderForgejoEventType, hookHeaderGiteaEventType)
	}
	payload, err := hookPayload(r, body)
	if err != nil {
		return ev, fmt.Errorf("%w: %v", forge.ErrBadPayload, err)
	}
	return parseHook(ev, payload, fine)
}

// hookPayload returns the JSON payload: the body itself, or the "payload" field of a form hook
// (Content-Type application/x-www-form-urlencoded), whose signature covers the JSON, not the
// form body.
func hookPayload(r *http.Request, body []byte) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("decoding form body: %v", err)
	}
	if !form.Has("payload") {
		return nil, errors.New("form body without payload field")
	}
	return []byte(form.Get("payload")), nil
}
