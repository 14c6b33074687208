package mailbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// An account the edge marked as a bot (by the forge's flag or its name: "ci-bot",
// "renovate[bot]") never starts, answers or validates anything, even with write access, and
// is never mentioned.
func TestBotAccountsAreIgnored(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("ci-bot")
	b.fake.SetAccess(repo, "ci-bot", true)
	b.fake.AddUser("reader[bot]")
	b.fake.SetAccess(repo, "reader[bot]", false)

	ev := assign("ci-bot")
	ev.Sender.Bot = true
	b.deliver(ev)
	mb := b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State, "a bot's assignment starts nothing")
	require.Empty(t, b.exec.jobs)

	c := comment("reader[bot]", "@"+"bot please retry")
	c.Sender.Bot, c.Comment.Author.Bot = true, true
	b.deliver(c)
	b.advance()
	l := forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "ci-bot", Bot: true}, LabelsKnown: true,
		Labels: []string{"type::task", "ai::validate_plan"}}
	b.deliver(l)
	mb = b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State)
	require.Empty(t, b.exec.jobs)
	for _, body := range b.comments() {
		require.NotContains(t, body, "@ci-bot", "a bot is never mentioned")
		require.NotContains(t, body, "@reader[bot]", "a bot is never mentioned")
	}
	require.Empty(t, b.comments(), "nothing is answered to a bot")
}

// An event the reconciliation or the poll derived (or the rebuild read) was never marked at the
// edge: a "ci-bot" with write access is still a bot by its name, so its assignment starts
// nothing and its labels validate nothing.
func TestBotAccountsByNameAreIgnoredUnmarked(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("ci-bot")
	b.fake.SetAccess(repo, "ci-bot", true)
	b.deliver(assign("ci-bot")) // Sender.Bot unset
	mb := b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State, "a bot's assignment starts nothing")
	require.Empty(t, b.exec.jobs)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "ci-bot"}, LabelsKnown: true,
		Labels: []string{"type::task", "ai::validate_plan"}})
	mb = b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State)
	require.Empty(t, b.exec.jobs)
}
