package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyedSecretsNameEverySecret(t *testing.T) {
	t.Parallel()
	c := &Config{DatabaseURL: "postgres://alfred:db-pass-123@db/alfred",
		Forges: []Forge{{Token: "forge-token-1", WebhookSecret: "hook-secret-1"}},
		Agents: []Agent{{APIKey: "agent-key-1"}, {}}}
	var keys []string
	for _, ks := range c.KeyedSecrets() {
		keys = append(keys, ks.Key)
		require.Contains(t, c.Secrets(), ks.Value.Reveal(), "every keyed secret is a secret of the censor")
	}
	require.Equal(t, []string{"database_url", "forges[0].token", "forges[0].webhook_secret", "agents[0].api_key",
		"the database password"}, keys)
}
