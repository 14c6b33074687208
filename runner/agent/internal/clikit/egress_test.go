package clikit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
)

// TestEgressHosts: an adapter's runs reach its provider, or only the host of its base URL.
func TestEgressHosts(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]string{
		"https://llm.example.org/v1":   "llm.example.org:443",
		"http://192.168.1.10:11434/v1": "192.168.1.10:11434",
		"http://[::1]:8080":            "[::1]:8080",
		"ftp://x.example":              "",
		"llm.example.org":              "",
	} {
		require.Equal(t, want, clikit.URLHostPort(u), u)
	}
	a, err := claudecode.New(claudecode.Config{Image: "i", APIKey: "k"})
	require.NoError(t, err)
	require.Equal(t, []string{"api.anthropic.com:443"}, a.EgressHosts())
	a, err = claudecode.New(claudecode.Config{Image: "i", APIKey: "k", BaseURL: "http://127.0.0.1:4000"})
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:4000"}, a.EgressHosts())
}
