package gitlab

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// TestSignDelivery: what SignDelivery sets is what Verify accepts for that token and no other,
// and both delivery id headers carry the id (none without one).
func TestSignDelivery(t *testing.T) {
	body := []byte(`{"object_kind":"issue"}`)
	r := httptest.NewRequest(http.MethodPost, "/webhooks/gitlab", strings.NewReader(string(body)))
	SignDelivery(r.Header, "t0ken", "d-1")
	require.NoError(t, srcSource(t, "t0ken").Verify(r, body))
	assert.ErrorIs(t, srcSource(t, "other").Verify(r, body), forge.ErrSignature)
	assert.Equal(t, "d-1", r.Header.Get("X-Gitlab-Event-UUID"))
	assert.Equal(t, "d-1", r.Header.Get("Idempotency-Key"))

	r.Header = http.Header{}
	SignDelivery(r.Header, "t0ken", "")
	require.NoError(t, srcSource(t, "t0ken").Verify(r, body))
	assert.Empty(t, r.Header.Get("Idempotency-Key"))
}
