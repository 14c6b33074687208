package mailbox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// hasQuickAction reports whether a line of body, with its carriage returns deleted as GitLab
// deletes them, reads as a quick action.
func hasQuickAction(body string) bool {
	for _, l := range strings.Split(strings.ReplaceAll(body, "\r", ""), "\n") {
		if len(l) > 1 && l[0] == '/' && (l[1]|0x20) >= 'a' && (l[1]|0x20) <= 'z' {
			return true
		}
	}
	return false
}

// gitlabIssue is a GitLab fake holding one issue of alice's with body.
func gitlabIssue(t *testing.T, body string) (*forgetest.Fake, forge.IssueRef) {
	t.Helper()
	fake := forgetest.NewFake(forge.KindGitLab)
	fake.AddUser("alice")
	fake.AddRepo(repo, "main", "/nonexistent.git")
	n := fake.AddIssue(repo, forgetest.SeedIssue{Title: "x", Author: "alice", Body: body})
	return fake, forge.IssueRef{Forge: "f", Repo: repo, Number: n}
}

// GitLab runs the quick actions of a changed description as the account that sends it, and
// keeps in the text those its writer had no right to run: the human's text Alfred sends back
// with its section is escaped too.
func TestQuickActionsInTheHumansDescriptionAreEscapedOnGitLab(t *testing.T) {
	t.Parallel()
	fake, ref := gitlabIssue(t, "Please fix.\n/label ~ai::auto_merge")
	g := mailbox.GuardPosts(fake, mailbox.PostGuard{})
	is, err := g.Issue(t.Context(), ref)
	require.NoError(t, err)
	require.NoError(t, g.SetIssueBody(t.Context(), ref, mailbox.SetSection(is.Body, "functional_analysis", "ok")))
	is, _ = fake.Issue(t.Context(), ref)
	require.False(t, hasQuickAction(is.Body), "sent as the bot: %q", is.Body)
}

// A section start without its end (text that forged one) does not stop the cleaning of the
// sections after it: the agent's text is censored and escaped.
func TestSectionsAfterAnUnterminatedStartAreCleaned(t *testing.T) {
	t.Parallel()
	fake, ref := gitlabIssue(t, "Please fix.\n<!-- alfred:section=zzz:start -->")
	g := mailbox.GuardPosts(fake, mailbox.PostGuard{Censor: func(s string) string { return strings.ReplaceAll(s, "hunter2", "[redacted]") }})
	is, err := g.Issue(t.Context(), ref)
	require.NoError(t, err)
	require.NoError(t, g.SetIssueBody(t.Context(), ref, mailbox.SetSection(is.Body, "self_review", "token hunter2\n/merge\nping @alfred-bot")))
	is, _ = fake.Issue(t.Context(), ref)
	require.False(t, hasQuickAction(is.Body), "agent text not escaped: %q", is.Body)
	require.NotContains(t, is.Body, "hunter2")
}
