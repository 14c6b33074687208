package admin

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A session expires after its TTL, belongs to the token in force (a handler with another token
// refuses it: changing the token ends every session), and the sessions kept stay under their
// ceiling.
func TestSessionsExpireAndFollowTheToken(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := newSessions(time.Hour, func() time.Time { return now })
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) })
	oldH := pageAuth("/ui", "old-token-0123456789", DefaultAttemptLimits(), s, ok)
	newH := pageAuth("/ui", "new-token-0123456789", DefaultAttemptLimits(), s, ok)

	r := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {"old-token-0123456789"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	oldH.ServeHTTP(w, r)
	require.Equal(t, http.StatusSeeOther, w.Code)
	cookie := w.Result().Cookies()[0]
	get := func(h http.Handler) int {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.AddCookie(cookie)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	require.Equal(t, http.StatusOK, get(oldH))
	require.Equal(t, http.StatusUnauthorized, get(newH), "the token changed: the session ended")
	now = now.Add(time.Hour)
	require.Equal(t, http.StatusUnauthorized, get(oldH), "expired")

	tok := sha256.Sum256([]byte("t"))
	for range maxSessions + 50 {
		_, _, err := s.create(tok)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(s.byID), maxSessions)
}

// The per-client budgets are bounded in number.
func TestAttemptsTrackBoundedClients(t *testing.T) {
	t.Parallel()
	a := newAttempts(DefaultAttemptLimits())
	for i := range maxAddresses + 10 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10." + itoa(i>>16) + "." + itoa((i>>8)&255) + "." + itoa(i&255) + ":1"
		done, _, ok := a.try(r)
		require.True(t, ok)
		done(false)
	}
	require.LessOrEqual(t, a.trackedClients(), maxAddresses)
}

func itoa(i int) string { return strconv.Itoa(i) }
