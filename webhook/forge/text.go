package forge

import "regexp"

// closingRE matches a closing keyword followed by what it would close: GitLab's default
// issue_closing_pattern (Close, Closes, Closed, Closing, Fix, Fixes, Fixed, Fixing, Resolve,
// Resolves, Resolved, Resolving, Implement, Implements, Implemented, Implementing, then an
// optional ":" and "issue"/"issues", then a reference: "#7", "group/project#7", an issue's
// URL, a Jira key; GitLab docs, "Default closing pattern") and Forgejo's and Gitea's default
// close and reopen keywords (close, closes, closed, fix, fixes, fixed, resolve, resolves,
// resolved; reopen, reopens, reopened; Gitea's modules/references, setting.Repository
// .PullRequest.CloseKeywords and ReopenKeywords), case-insensitively. Group 1 is the keyword.
var closingRE = regexp.MustCompile(`(?i)\b(clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?|reopen(?:s|ed|ing)?)(:?[ \t]+(?:issues?[ \t]+)?(?:[A-Za-z0-9_.\-/]*#[0-9]|[A-Z][A-Z0-9_]+-[0-9]|https?://))`)

// wordJoiner is U+2060 WORD JOINER: invisible where the text is shown, it ends the keyword
// for the forge's pattern.
const wordJoiner = "\u2060"

// DefuseClosingReferences writes every closing or reopening keyword of s that is followed by
// an issue reference ("Fixes #7", "closes acme/shop#7", "Resolves: https://…/issues/7") with
// a word joiner (U+2060) after its first letter, so that neither GitLab nor Forgejo closes or
// reopens that issue when a merge request whose description, title or commit message holds
// it is merged. The text reads the same; a keyword followed by no reference is left alone,
// and defusing twice changes nothing. For the texts Alfred puts in a merge request or a
// commit that it did not write itself (an agent's summary and commit message, the issue's
// title): Alfred's own "Closes #N" of its issue is added after.
func DefuseClosingReferences(s string) string {
	return closingRE.ReplaceAllStringFunc(s, func(m string) string { return m[:1] + wordJoiner + m[1:] })
}
