package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
)

// The retention sweep runs only when some scope purges, and asks for the mailboxes closed
// before the shortest retention of all.
func TestRetentionSweepOnlyWhenSomethingPurges(t *testing.T) {
	t.Parallel()
	days := func(n int) *int { return &n }
	cfg := &config.Config{Scopes: map[string]config.Scope{"acme": {RetentionDays: days(0)}}}
	require.Nil(t, (&server{cfg: cfg}).retention(), "retention_days 0 everywhere: no sweep")

	cfg.RetentionDays = 30
	cfg.Scopes["acme/shop"] = config.Scope{RetentionDays: days(7)}
	r := (&server{cfg: cfg}).retention()
	require.NotNil(t, r)
	require.Equal(t, 7, r.MinDays)
	require.Equal(t, 7, r.Days("acme/shop"))
	require.Equal(t, 0, r.Days("acme/other"))
	require.Equal(t, 30, r.Days("elsewhere/repo"))
}
