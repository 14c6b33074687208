package forgehttp

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestErrorMatchesSentinelAndCauseWithoutToken(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]error{
		http.StatusNotFound: forge.ErrNotFound, http.StatusUnauthorized: forge.ErrForbidden,
		http.StatusForbidden: forge.ErrForbidden, http.StatusConflict: forge.ErrConflict,
		http.StatusUnprocessableEntity: forge.ErrConflict,
	} {
		err := NewError("forgejo", "get issue o/r#1", status, errors.New("bad token tok-123"), "tok-123")
		require.ErrorIs(t, err, want, status)
		require.NotContains(t, err.Error(), "tok-123")
		require.Contains(t, err.Error(), "[redacted]")
	}
	err := NewError("gitlab", "list notes", 0, context.Canceled, "tok-9")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "gitlab: list notes: context canceled", err.Error())
	require.Equal(t, "forgejo: op: forge: unavailable: HTTP 502: bad gateway",
		NewError("forgejo", "op", http.StatusBadGateway, errors.New("bad gateway"), "tok-9").Error())
	require.Equal(t, "gitlab: op: forge: not found: 404 {message: 404 Not Found}",
		NewError("gitlab", "op", http.StatusNotFound, errors.New("404 {message: 404 Not Found}"), "tok-9").Error())
	require.ErrorIs(t, Sentinel(http.StatusInternalServerError), forge.ErrUnavailable)
	require.ErrorIs(t, Sentinel(http.StatusTooManyRequests), forge.ErrUnavailable)
	require.ErrorIs(t, NewError("forgejo", "op", 0, errors.New("connection refused"), "t"), forge.ErrUnavailable)
	for _, code := range []int{http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusGone} {
		require.ErrorIs(t, Sentinel(code), forge.ErrRefused, "%d", code)
	}
	require.ErrorIs(t, Sentinel(http.StatusRequestTimeout), forge.ErrUnavailable, "408 after its retries")
	require.NoError(t, Sentinel(http.StatusOK))
}

func TestRetriesDefaults(t *testing.T) {
	t.Parallel()
	n, lo, hi := Retries(ClientConfig{})
	require.Equal(t, []any{DefaultMaxRetries, DefaultRetryWaitMin, DefaultRetryWaitMax}, []any{n, lo, hi})
	n, lo, hi = Retries(ClientConfig{MaxRetries: -1, RetryWaitMin: time.Second, RetryWaitMax: time.Millisecond})
	require.Equal(t, []any{0, time.Second, time.Second}, []any{n, lo, hi}, "no retries; max raised to min")
}

func TestSignIsHexHMACSHA256(t *testing.T) {
	t.Parallel()
	// RFC 4231 test case 2.
	require.Equal(t, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
		Sign("Jefe", []byte("what do ya want for nothing?")))
}

func TestFirstHeader(t *testing.T) {
	t.Parallel()
	h := http.Header{"X-Forgejo-Delivery": {"  "}, "X-Gitea-Delivery": {" d-1 "}}
	require.Equal(t, "d-1", FirstHeader(h, "X-Forgejo-Delivery", "X-Gitea-Delivery"))
	require.Empty(t, FirstHeader(h, "X-Gitlab-Event"))
}
