package gitlab

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// GitLab webhook request headers, from gitlabhq doc/user/project/integrations/webhooks.md.
const (
	// hookHeaderEvent names the hook type, "<Type> Hook" (for example "Issue Hook",
	// "Confidential Note Hook", "System Hook", "Service Hook").
	hookHeaderEvent = "X-Gitlab-Event"
	// hookHeaderToken carries the hook's secret token in clear text (not an HMAC).
	hookHeaderToken = "X-Gitlab-Token"
	// hookHeaderIdempotencyKey (GitLab 17.4+) stays the same when a delivery is resent.
	hookHeaderIdempotencyKey = "Idempotency-Key"
	// hookHeaderEventUUID (GitLab 14.8+) identifies the triggering event.
	hookHeaderEventUUID = "X-Gitlab-Event-UUID"
)

// SignDelivery sets on h what GitLab sends when the hook's secret token is token: the token
// header and, when deliveryID is not empty, the event UUID and idempotency key headers.
func SignDelivery(h http.Header, token, deliveryID string) {
	h.Set(hookHeaderToken, token)
	if deliveryID != "" {
		h.Set(hookHeaderEventUUID, deliveryID)
		h.Set(hookHeaderIdempotencyKey, deliveryID)
	}
}

// SourceConfig configures a GitLab webhook Source.
type SourceConfig struct {
	// Tokens are the accepted secret tokens, compared with X-Gitlab-Token. More than one lets
	// a secret be rotated: configure the new one, change the hook, remove the old one. At least
	// one is required; empty strings are rejected.
	Tokens []string `json:"-"`
}

// String hides the tokens, so printing a config never leaks them.
func (c SourceConfig) String() string {
	return fmt.Sprintf("gitlab.SourceConfig{Tokens: %d x [redacted]}", len(c.Tokens))
}

// Validate reports a configuration the Source cannot run with.
func (c SourceConfig) Validate() error {
	if len(c.Tokens) == 0 {
		return errors.New("gitlab webhook source: no secret token configured")
	}
	for i, t := range c.Tokens {
		if t == "" {
			return fmt.Errorf("gitlab webhook source: token %d is empty", i)
		}
	}
	return nil
}

// Source verifies and parses GitLab webhook deliveries (project, group, system and integration
// hooks). It satisfies webhook.Source and is safe for concurrent use.
type Source struct {
	tokens [][]byte
}

// NewSource validates cfg and builds a Source.
func NewSource(cfg SourceConfig) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Source{}
	for _, t := range cfg.Tokens {
		s.tokens = append(s.tokens, []byte(t))
	}
	return s, nil
}

// Kind returns forge.KindGitLab.
func (s *Source) Kind() forge.Kind { return forge.KindGitLab }

// Verify compares X-Gitlab-Token with every configured token in constant time. A missing or
// non-matching token gives an error wrapping forge.ErrSignature that does not contain the
// received value.
func (s *Source) Verify(r *http.Request, _ []byte) error {
	got := r.Header.Get(hookHeaderToken)
	if got == "" {
		return fmt.Errorf("%w: no %s header", forge.ErrSignature, hookHeaderToken)
	}
	ok := 0
	for _, want := range s.tokens {
		ok |= subtle.ConstantTimeCompare([]byte(got), want)
	}
	if ok != 1 {
		return fmt.Errorf("%w: %s matches no configured token", forge.ErrSignature, hookHeaderToken)
	}
	return nil
}

// Parse normalises a delivery. It routes on the body's object_kind (which is what "System
// Hook" and "Service Hook" deliveries need) and uses X-Gitlab-Event for the confidential
// variants and for logs. DeliveryID is Idempotency-Key, else X-Gitlab-Event-UUID, else empty
// (the Receiver then uses the body hash).
//
// Mapping: Issue Hook open/close/reopen to the issue events, update to EventLabels,
// EventAssignees or EventIssueEdited by what changed; Note Hook on an issue or merge request to
// EventComment / EventCommentEdited; Merge Request Hook open/reopen, update with new commits,
// labels or assignees, merge, close, approved/unapproved; Pipeline Hook to EventPipeline.
// Everything else (push, tag push, job, emoji, notes on commits and snippets, merge-request
// title/draft/reviewer/milestone edits…) is a *forge.IgnoreError.
func (s *Source) Parse(r *http.Request, body []byte) (forge.Event, error) {
	header := strings.TrimSpace(r.Header.Get(hookHeaderEvent))
	ev := forge.Event{
		Kind:       forge.KindGitLab,
		Header:     header,
		DeliveryID: forgehttp.FirstHeader(r.Header, hookHeaderIdempotencyKey, hookHeaderEventUUID),
	}
	if header == "" {
		return ev, fmt.Errorf("%w: no %s header", forge.ErrBadPayload, hookHeaderEvent)
	}
	return parseHook(ev, body)
}
