package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestLifecycleWordPasswordKeepsMarkers runs the whole lifecycle on PostgreSQL with a database
// password that is a word of Alfred's own texts ("alfred", the old development
// password): the censor hides it, and every hidden marker of the bot's comments and of the
// issue description's sections still reads as a marker. Load refuses such a password
// (TestServeRefusesConfusableSecret); the test sets it after Load, as a Censor built any other
// way would see it.
func TestLifecycleWordPasswordKeepsMarkers(t *testing.T) {
	t.Parallel()
	const word = "alfred"
	e := startE2EConfig(t, storePostgres, forge.KindForgejo, "acceptance/sandbox", 24*time.Hour,
		mustScriptAgents(t), func(cfg *config.Config) {
			cfg.DatabaseURL = config.Secret(wordPasswordRole(t, cfg.DatabaseURL.Reveal(), word))
		})
	require.Contains(t, e.srv.cfg.Secrets(), word, "the censor hides the word")
	lifecycleForgejoRecordedDeliveries(t, e)

	var marked int
	for _, c := range e.forgejo.IssueComments(e.issue) {
		if !strings.EqualFold(c.Author.Login, forgetest.BotLogin) {
			continue
		}
		_, _, ok := mailbox.ParseMarker(c.Body)
		require.True(t, ok, "the bot's comment lost its marker:\n%s", c.Body)
		marker, _, _ := strings.Cut(c.Body, "\n")
		require.NotContains(t, marker, censor.Redacted)
		marked++
	}
	require.Greater(t, marked, 5, "the lifecycle posted the bot's comments")
	body := e.forgejo.IssueBody(e.issue)
	_, ok := mailbox.Section(body, "functional_analysis")
	require.True(t, ok, "the description's section markers are intact:\n%s", body)
	require.NotContains(t, body, censor.Redacted)
}

func mustScriptAgents(t *testing.T) string {
	agents, _ := scriptAgents(t, lifecycleScript)
	return agents
}

// wordPasswordRole creates a login role for the test whose password is word, a member of the
// role of dsn (so it has its privileges on the test's schema), dropped when the test ends; it
// returns dsn with that role and password.
func wordPasswordRole(t *testing.T, dsn, word string) string {
	t.Helper()
	ctx := context.Background()
	db, err := sqlx.ConnectContext(ctx, "postgres", dsn)
	require.NoError(t, err)
	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "alfred_word_" + hex.EncodeToString(b[:])
	var owner string
	require.NoError(t, db.GetContext(ctx, &owner, "SELECT current_user"))
	_, err = db.ExecContext(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+word+"' IN ROLE "+owner)
	require.NoError(t, err)
	t.Cleanup(func() { // after the server is closed (cleanups run last first)
		_, _ = db.ExecContext(ctx, "DROP OWNED BY "+role)
		_, err := db.ExecContext(ctx, "DROP ROLE "+role)
		require.NoError(t, err)
		_ = db.Close()
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.UserPassword(role, word)
	return u.String()
}
