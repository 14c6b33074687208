package mailbox

import (
	"regexp"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// The fixed pieces of the hidden markers: a comment's "<!-- alfred:key=KEY:kind=KIND -->" and a
// section's "<!-- alfred:section=NAME:start -->" … "<!-- alfred:section=NAME:end -->".
const (
	markerStart       = "<!-- alfred:" // what every marker starts with
	markerKeyOpen     = "<!-- alfred:key="
	markerKind        = ":kind="
	markerClose       = " -->"
	sectionOpen       = "<!-- alfred:section="
	sectionStartClose = ":start -->"
	sectionEndClose   = ":end -->"
)

// Every comment Alfred posts starts with a hidden marker naming its key (unique within the
// mailbox) and kind. Before posting, Alfred looks for its marker and edits that comment in
// place, so a retried pass never posts twice.
var markerRE = regexp.MustCompile(regexp.QuoteMeta(markerKeyOpen) + `([^:>\s]+)` + regexp.QuoteMeta(markerKind) +
	`([^:>\s]+)` + regexp.QuoteMeta(markerClose))

// Marker renders the hidden marker for a comment key and kind, e.g.
// "<!-- alfred:key=ack:kind=ack -->".
func Marker(key, kind string) string {
	return markerKeyOpen + key + markerKind + kind + markerClose
}

// MarkerTexts returns the fixed pieces of every hidden marker (comments' and description
// sections'), without their variable key, kind and name. The censor keeps them
// (internal/base/censor, Config.Keep): finding, editing and deduplicating Alfred's own comments and
// sections depends on them, and a secret that happens to be a word of them ("alfred") must not
// break them.
func MarkerTexts() []string {
	return []string{markerKeyOpen, markerKind, markerClose, sectionOpen, sectionStartClose, sectionEndClose}
}

// ParseMarker returns the key and kind of the first marker in body, ok false when none.
func ParseMarker(body string) (key, kind string, ok bool) {
	m := markerRE.FindStringSubmatch(body)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

func sectionMarkers(name string) (start, end string) {
	return sectionOpen + name + sectionStartClose, sectionOpen + name + sectionEndClose
}

// SetSection returns body with the named section replaced by content, or appended after the
// human's text when the section is not there yet (after a blank line, adding only the line
// breaks the text does not end with). The section sits between the hidden markers
// "<!-- alfred:section=NAME:start -->" and "<!-- alfred:section=NAME:end -->"; text outside
// them is kept byte for byte. A marker of Alfred's inside content (an agent's text that ends
// the section early or forges a comment's key) is written "&lt;!-- alfred:…", shown as text
// and never found as a marker, so content cannot split the section; a closing keyword with an
// issue reference in it closes nothing (forge.DefuseClosingReferences: a section of a merge
// request's description holds an agent's text).
func SetSection(body, name, content string) string {
	start, end := sectionMarkers(name)
	content = defuseAgentText(content)
	block := start + "\n" + strings.TrimSpace(content) + "\n" + end
	i := strings.Index(body, start)
	if i >= 0 {
		if j := strings.Index(body[i:], end); j >= 0 {
			return body[:i] + block + body[i+j+len(end):]
		}
	}
	switch {
	case body == "":
		return block
	case strings.HasSuffix(body, "\n\n"):
		return body + block
	case strings.HasSuffix(body, "\n"):
		return body + "\n" + block
	}
	return body + "\n\n" + block
}

// defuseAgentText makes a text Alfred did not write safe to put in a description: its markers
// defused (defuseMarkers) and its closing references too (forge.DefuseClosingReferences).
func defuseAgentText(s string) string { return forge.DefuseClosingReferences(defuseMarkers(s)) }

// defuseMarkers writes every "<!-- alfred:" of s (text an agent wrote) as "&lt;!-- alfred:",
// shown as text and never found as one of Alfred's markers.
func defuseMarkers(s string) string {
	return strings.ReplaceAll(s, markerStart, "&lt;"+strings.TrimPrefix(markerStart, "<"))
}

// Section returns the content of the named section, ok false when absent.
func Section(body, name string) (string, bool) {
	start, end := sectionMarkers(name)
	i := strings.Index(body, start)
	if i < 0 {
		return "", false
	}
	rest := body[i+len(start):]
	j := strings.Index(rest, end)
	if j < 0 {
		return "", false
	}
	return strings.TrimSpace(rest[:j]), true
}

// markerKinds are the kinds of Alfred's comments, and markerKeyStems the fixed words of their
// keys ("ack" of "ack-1"); TestVocabularyCoversPosts keeps both in step with the post calls.
var (
	markerKinds = []string{"ack", "analysis", "answer", "auto_merge", "blocked", "ci", "ci_fix", "conflict",
		"defaults", "held", "merge", "merge_request", "plan", "questions", "queued", "refused",
		"reply", "retry", "review", "review_fix", "section", "self_review", "set_aside", "status", "stuck", "until_green", "validated"}
	markerKeyStems = []string{"ack-", "analysis-", "answer-", "auto-merge", "blocked-", "ci-", "cifix-",
		"conflict-", "defaults-", "held-", "merge-", "mr-", "no-pipeline-", "plan-", "questions-",
		"queued-", "refused-", "reply-", "retry-", "review-fix-", "review-run", "section-", "self-review-fix-", "set-aside-", "stuck-",
		"until-green-", "validated-", ".part-", ProgressKey}
	sectionNames = []string{sectionFunctional, sectionSelfReview}
)

// Vocabulary returns the texts of Alfred's own structure beyond MarkerTexts: the kinds of its
// comments, the fixed words of their keys and the names of its description sections. A secret
// found in one of them (or in a label name) would be censored out of Alfred's own markers, so
// internal/config refuses it.
func Vocabulary() []string {
	return slices.Concat(MarkerTexts(), markerKinds, markerKeyStems, sectionNames)
}
