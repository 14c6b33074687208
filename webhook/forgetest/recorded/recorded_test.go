package recorded_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	// NNN.headers next to NNN.json, with a request line: the live captures.
	h, body, err := recorded.Load(filepath.Join(forgetest.FixtureDir(t, forge.KindForgejo), "forgejo-live", "001-issues-opened.json"))
	require.NoError(t, err)
	assert.Len(t, body, 5431)
	assert.Equal(t, "issues", h.Get("X-Forgejo-Event-Type"))
	assert.Equal(t, "782b5c21-dcb6-4d9c-a85d-933d4a07a2ae", h.Get("X-Forgejo-Delivery"))
	assert.Empty(t, h.Get("POST /webhooks/forgejo HTTP/1.1"))
	assert.Equal(t, h.Get("X-Forgejo-Signature"), forgejo.Sign("acceptance-webhook-secret", body))

	// X.json.headers without a request line.
	h, body, err = recorded.Load(filepath.Join(forgetest.FixtureDir(t, forge.KindForgejo), "gitea", "issues_opened.json"))
	require.NoError(t, err)
	assert.Equal(t, "issues", h.Get("X-Gitea-Event"))
	assert.Equal(t, h.Get("X-Gitea-Signature"), forgejo.Sign("IsWishesWereHorsesWedAllBeEatingSteak!", body))

	// No headers file.
	h, _, err = recorded.Load(filepath.Join(forgetest.FixtureDir(t, forge.KindGitLab), "push_hook.json"))
	require.NoError(t, err)
	assert.Empty(t, h)

	_, _, err = recorded.Load(filepath.Join(t.TempDir(), "missing.json"))
	assert.Error(t, err)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.headers"), []byte("no colon here\n"), 0o600))
	_, _, err = recorded.Load(filepath.Join(dir, "x.json"))
	assert.Error(t, err)
}
