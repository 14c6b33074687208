package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// forges[].transport takes a name, "both" or a list; a forge that is only polled needs no
// webhook secret; an unknown transport is refused with its key.
func TestTransport(t *testing.T) {
	load := func(transport string, env ...string) (*Config, error) {
		path := filepath.Join(t.TempDir(), "alfred.yaml")
		require.NoError(t, os.WriteFile(path, []byte(`
data_dir: /srv/alfred
forges:
  - name: codeberg
    kind: forgejo
    base_url: https://codeberg.example.org
    token: tok-s3cr3t-forgejo
    bot_user: alfred
`+transport+`
agents:
  - name: claude
    adapter: claude-code
    image: alfred/claude:1
    api_key: key-s3cr3t-claude
phases:
  default: claude
`), 0o600))
		return Load(path, env)
	}
	c, err := load("    transport: poll\n    poll_interval: 2s")
	require.NoError(t, err, "no webhook_secret is needed for poll alone")
	require.Equal(t, Transports{"poll"}, c.Forges[0].Transport)
	require.True(t, c.Forges[0].Transport.Poll())
	require.False(t, c.Forges[0].Transport.Webhook())
	require.Equal(t, 2*time.Second, c.Forges[0].PollEvery())

	c, err = load("    transport: both\n    webhook_secret: hook-s3cr3t")
	require.NoError(t, err)
	require.Equal(t, "webhook + poll", c.Forges[0].Transport.String())
	require.Equal(t, DefaultPollInterval, c.Forges[0].PollEvery())

	c, err = load("    transport: [webhook, poll]\n    webhook_secret: hook-s3cr3t")
	require.NoError(t, err)
	require.Equal(t, Transports{"webhook", "poll"}, c.Forges[0].Transport)

	_, err = load("    transport: [webhook, poll]")
	require.ErrorContains(t, err, "forges[0].webhook_secret: required", "webhooks need their secret")
	_, err = load("")
	require.ErrorContains(t, err, "forges[0].webhook_secret: required", "the default is webhook")
	_, err = load("    transport: pigeon")
	require.ErrorContains(t, err, `forges[0].transport[0]: "pigeon" is not webhook, poll or both`)

	c, err = load("", "ALFRED_FORGES_CODEBERG_TRANSPORT=poll", "ALFRED_FORGES_CODEBERG_POLL_INTERVAL=3s")
	require.NoError(t, err)
	require.Equal(t, "poll", c.Forges[0].Transport.String())
	require.Equal(t, 3*time.Second, c.Forges[0].PollEvery())
}
