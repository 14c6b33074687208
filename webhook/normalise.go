package webhook

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/alfred-bot/alfred/internal/base/textwalk"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Caps on identifiers, in bytes. Each is stored in an indexed column or copied into several
// places, so a longer value is refused (400) rather than stored. The forges' own limits are far
// lower: a GitLab or Forgejo login has at most 255 characters, a git ref 255 bytes by
// convention, a commit id 40 (SHA-1) or 64 (SHA-256) hex digits.
const (
	// MaxDeliveryIDBytes caps the delivery id (X-Forgejo-Delivery, Idempotency-Key,
	// X-Gitlab-Event-UUID). The forges send a 36-character UUID.
	MaxDeliveryIDBytes = 255
	// MaxRepoBytes caps the repository path ("owner/name", a GitLab "group/sub/name").
	MaxRepoBytes = 1024
	// MaxLoginBytes caps a user login.
	MaxLoginBytes = 255
	// MaxRefBytes caps a branch or ref name.
	MaxRefBytes = 1024
	// MaxSHABytes caps a commit id.
	MaxSHABytes = 128
	// MaxLabelBytes caps one label name, and MaxLabels the number of labels or assignees in one
	// list.
	MaxLabelBytes = 1024
	MaxLabels     = 1000
)

// normalise makes a parsed event storable and bounded. Identifiers (delivery id, repository,
// logins, refs, commit ids) over their cap, or holding invalid UTF-8 or a NUL, are refused with
// an error wrapping forge.ErrBadPayload that names the field. Then every other string becomes
// valid UTF-8 without NUL: a NUL or an invalid byte becomes U+FFFD (PostgreSQL text refuses
// both, and a mailbox that copied one could never be saved again).
func normalise(ev *forge.Event) error {
	checks := []limit{
		{"delivery id", ev.DeliveryID, MaxDeliveryIDBytes},
		{"repository", ev.Target.Repo, MaxRepoBytes},
		{"sender login", ev.Sender.Login, MaxLoginBytes},
		{"author login", ev.Author.Login, MaxLoginBytes},
		{"event header", ev.Header, MaxLoginBytes},
		{"action", ev.Action, MaxLoginBytes},
		{"closing commit", ev.ClosedByCommit, MaxSHABytes},
	}
	if mr := ev.MergeRequest; mr != nil {
		checks = append(checks, []limit{
			{"source branch", mr.SourceBranch, MaxRefBytes}, {"target branch", mr.TargetBranch, MaxRefBytes},
			{"head commit", mr.HeadSHA, MaxSHABytes}, {"merge request author", mr.Author.Login, MaxLoginBytes},
		}...)
	}
	if p := ev.Pipeline; p != nil {
		checks = append(checks, []limit{{"pipeline ref", p.Ref, MaxRefBytes}, {"pipeline commit", p.SHA, MaxSHABytes}}...)
	}
	if c := ev.Comment; c != nil {
		checks = append(checks, limit{"comment author", c.Author.Login, MaxLoginBytes})
	}
	// Identifiers are checked before the text is cleaned: two different invalid ids must not
	// become one.
	for _, c := range checks {
		if err := c.check(); err != nil {
			return err
		}
	}
	for _, list := range [][]string{ev.Labels, ev.PreviousLabels, ev.Assignees, ev.PreviousAssignees} {
		if len(list) > MaxLabels {
			return fmt.Errorf("%w: more than %d labels or assignees", forge.ErrBadPayload, MaxLabels)
		}
		for _, s := range list {
			if len(s) > MaxLabelBytes {
				return fmt.Errorf("%w: label or assignee longer than %d bytes", forge.ErrBadPayload, MaxLabelBytes)
			}
		}
	}
	textwalk.Map(ev, textwalk.Storable)
	return nil
}

// limit is one identifier and its cap in bytes.
type limit struct {
	field string
	value string
	max   int
}

// check refuses a value over its cap, or not valid UTF-8, or holding a NUL, with an error
// wrapping forge.ErrBadPayload that names the field.
func (c limit) check() error {
	if len(c.value) > c.max {
		return fmt.Errorf("%w: %s longer than %d bytes", forge.ErrBadPayload, c.field, c.max)
	}
	if !storable(c.value) {
		return fmt.Errorf("%w: %s is not valid UTF-8 or holds a NUL", forge.ErrBadPayload, c.field)
	}
	return nil
}

// checkDeliveryID refuses a delivery id normalise would refuse, for the answers given before
// normalise runs (an event Alfred ignores, whose id the answer echoes).
func checkDeliveryID(id string) error {
	return limit{"delivery id", id, MaxDeliveryIDBytes}.check()
}

// storable reports whether PostgreSQL text accepts s: valid UTF-8 without NUL.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
