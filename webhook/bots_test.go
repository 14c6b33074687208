package webhook_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestIsBotLogin(t *testing.T) {
	for _, tc := range []struct {
		kind  forge.Kind
		id    int64
		login string
		bot   bool
	}{
		{forge.KindForgejo, 5, "renovate[bot]", true},
		{forge.KindForgejo, 5, "ci-bot", true},
		{forge.KindForgejo, 5, "release_bot", true},
		{forge.KindForgejo, -2, "forgejo-actions", true},
		{forge.KindForgejo, 7, "gitea-actions", true},
		{forge.KindForgejo, 5, "alice", false},
		{forge.KindForgejo, 5, "abbot", false},
		{forge.KindForgejo, 5, "bottle", false},
		{forge.KindGitLab, 9, "project_42_bot_0a1b2c3d", true},
		{forge.KindGitLab, 9, "project_42_bot", true},
		{forge.KindGitLab, 9, "group_7_bot_ff00", true},
		{forge.KindGitLab, 9, "service_account_group_7_abc", true},
		{forge.KindGitLab, 9, "support-bot", true},
		{forge.KindGitLab, 9, "ghost", true},
		{forge.KindGitLab, 9, "root", false},
		{forge.KindGitLab, 9, "project_manager", false},
	} {
		require.Equal(t, tc.bot, forge.IsBotLogin(tc.kind, tc.id, tc.login), "%s %d %s", tc.kind, tc.id, tc.login)
	}
}

// The edge marks bot accounts in the stored event, so the mailbox can tell them apart.
func TestBotSenderIsMarked(t *testing.T) {
	b := newStoreBundle(t)
	var d map[string]any
	require.NoError(t, json.Unmarshal(readFixture(t, "forgejo-live/006-issue_comment-created.json"), &d))
	d["sender"].(map[string]any)["login"] = "ci-bot"
	d["comment"].(map[string]any)["user"].(map[string]any)["login"] = "ci-bot"
	body, err := json.Marshal(d)
	require.NoError(t, err)
	code, doc := b.post(t, forgetest.NewForgejoRequest("/webhooks/forgejo", "issue_comment", "bot-comment", testForgejoSecret, body))
	require.Equal(t, http.StatusAccepted, code, "%v", doc)
	_, ev := b.onlyPending(t, forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: 1})
	require.True(t, ev.Sender.Bot)
	require.True(t, ev.Comment.Author.Bot)
}
