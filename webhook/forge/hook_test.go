package forge_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestSameHookURL(t *testing.T) {
	t.Parallel()
	const want = "https://alfred.example.org/webhooks/gl"
	for hook, same := range map[string]bool{
		want: true, want + "/": true, "HTTPS://Alfred.Example.org/webhooks/gl": true, want + "?x=1": true,
		"https://alfred.example.org/webhooks/gl2": false, "https://alfred.example.org/webhooks/GL": false,
		"http://alfred.example.org/webhooks/gl": false, "https://alfred.example.org:8443/webhooks/gl": false, "https://alfred.example.org:443/webhooks/gl": true,
		"https://other.example.org/webhooks/gl": false, "/webhooks/gl": false, "": false, "%zz": false,
	} {
		require.Equal(t, same, forge.SameHookURL(hook, want), hook)
	}
}
