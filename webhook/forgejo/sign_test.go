package forgejo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// TestSignDelivery: what SignDelivery sets is what Verify accepts for that secret and no
// other, and both delivery id headers carry the id (none without one).
func TestSignDelivery(t *testing.T) {
	body := []byte(`{"action":"opened"}`)
	r := srcRequest(body, "Content-Type", "application/json")
	SignDelivery(r.Header, "s3cr3t", body, "d-1")
	require.NoError(t, srcSource(t, "s3cr3t").Verify(r, body))
	assert.ErrorIs(t, srcSource(t, "other").Verify(r, body), forge.ErrSignature)
	assert.Equal(t, "d-1", r.Header.Get("X-Forgejo-Delivery"))
	assert.Equal(t, "d-1", r.Header.Get("X-Gitea-Delivery"))

	r = srcRequest(body)
	SignDelivery(r.Header, "s3cr3t", body, "")
	require.NoError(t, srcSource(t, "s3cr3t").Verify(r, body))
	assert.Empty(t, r.Header.Get("X-Forgejo-Delivery"))
}
