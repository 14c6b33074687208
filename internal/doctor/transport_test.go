package doctor_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/doctor"
)

// A polled forge: the doctor names the transport and polls once with the bot's token; with
// webhooks off no repository's hook is checked; a forge whose poll fails is a failure.
func TestPollTransport(t *testing.T) {
	t.Parallel()
	s, cfg := good(t)
	cfg.Forges[0].Poll, cfg.Forges[0].NoWebhook = true, true
	r := doctor.Run(t.Context(), cfg)
	var b strings.Builder
	require.NoError(t, r.Write(&b))
	require.Contains(t, b.String(), "[ok]   forge fj: transport: poll: the bot's notifications answer")
	require.NotContains(t, b.String(), "webhook:", "no hook is checked for a forge that is only polled")
	require.False(t, r.Blocking())

	cfg.Forges[0].NoWebhook = false
	s.FailNext(http.StatusInternalServerError, http.StatusInternalServerError, http.StatusInternalServerError, http.StatusInternalServerError)
	cfg.Forges[0].Repos = nil
	r = doctor.Run(t.Context(), cfg)
	b.Reset()
	require.NoError(t, r.Write(&b))
	require.Contains(t, b.String(), "[FAIL] forge fj: transport: webhook + poll: the poll fails")
	require.True(t, r.Blocking())
}
