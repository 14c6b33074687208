package doctor_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/webhook/forge"
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

// stuckPoller is a forge client whose poll never answers (a forge that accepts the connection
// and says nothing), but for its context's end.
type stuckPoller struct{ doctor.ForgeClient }

func (stuckPoller) Changes(ctx context.Context, _ time.Time) ([]forge.Change, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// The poll check has a deadline like every other: a forge that never answers the poll fails
// the check within it instead of holding the doctor.
func TestPollCheckHasADeadline(t *testing.T) {
	t.Parallel()
	_, cfg := good(t)
	cfg.CheckTimeout = 200 * time.Millisecond
	cfg.Forges[0].Poll, cfg.Forges[0].NoWebhook = true, true
	cfg.Forges[0].Client = stuckPoller{cfg.Forges[0].Client}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang's bound, not a timing assertion
	defer cancel()
	r := doctor.Run(ctx, cfg)
	require.NoError(t, ctx.Err(), "the poll check ended within its own deadline")
	var b strings.Builder
	require.NoError(t, r.Write(&b))
	require.Contains(t, b.String(), "[FAIL] forge fj: transport: poll: the poll fails: no answer within 200ms")
}
