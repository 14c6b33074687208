package forgetest_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// The deliveries the stand-in builds from its state (what alfred demo sends) verify and parse
// as Forgejo's do: an assignment, a label added by a human, a comment.
func TestForgejoHooksParse(t *testing.T) {
	t.Parallel()
	const secret = "demo-secret-0123456789"
	s := forgetest.NewForgejoHandler("http://127.0.0.1:1")
	s.AddRepo("alice/sandbox", "main", "/nowhere.git")
	s.AddUser("alice")
	ref := forge.IssueRef{Forge: "forgejo", Repo: "alice/sandbox", Number: s.AddIssue("alice/sandbox",
		forgetest.SeedIssue{Title: "Export", Author: "alice", Assignees: []string{forgetest.BotLogin}})}
	src, err := forgejo.NewSource(forgejo.SourceConfig{Secrets: []string{secret}})
	require.NoError(t, err)
	parse := func(eventType string, body []byte) forge.Event {
		r := forgetest.NewForgejoRequest("http://alfred/webhooks/forgejo", eventType, "d-"+eventType, secret, body)
		require.NoError(t, src.Verify(r, body))
		ev, err := src.Parse(r, body)
		require.NoError(t, err)
		require.Equal(t, "alice/sandbox", ev.Target.Repo)
		require.Equal(t, ref.Number, ev.Target.Number)
		return ev
	}

	ev := parse("issue_assign", s.IssueHook(ref, "assigned", "alice"))
	require.Equal(t, forge.EventAssignees, ev.Type)
	require.Equal(t, []string{forgetest.BotLogin}, ev.Assignees)
	require.Equal(t, "alice", ev.Sender.Login)

	s.AddIssueLabels(ref, "ai::validate_plan")
	ev = parse("issue_label", s.IssueHook(ref, "label_updated", "alice"))
	require.Equal(t, forge.EventLabels, ev.Type)
	require.Equal(t, []string{"ai::validate_plan"}, ev.Labels)

	id := s.AddComment(ref, "alice", "q1: b")
	ev = parse("issue_comment", s.CommentHook(ref.Repo, id, "created"))
	require.Equal(t, forge.EventComment, ev.Type)
	require.Equal(t, "q1: b", ev.Comment.Body)
	require.Equal(t, "alice", ev.Comment.Author.Login)

	// The handler answers the API as the listening stand-in does.
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: srv.URL, Token: s.Token})
	require.NoError(t, err)
	is, err := c.Issue(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, []string{"ai::validate_plan"}, is.Labels)
}
