package admin

import (
	"context"
	"math/rand/v2"
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
// refuses it: changing the token ends every session, and a login under the new token prunes
// them), its last use is renewed at most once a minute, and the sessions kept in memory stay
// under their ceiling.
func TestSessionsExpireAndFollowTheToken(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	keep := NewMemorySessions()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) })
	oldH := PageAuthWith("/ui", "old-token-0123456789", PageOptions{Sessions: keep, TTL: time.Hour, Now: clock}, ok)
	newH := PageAuthWith("/ui", "new-token-0123456789", PageOptions{Sessions: keep, TTL: time.Hour, Now: clock}, ok)

	login := func(h http.Handler, token string) *http.Cookie {
		r := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusSeeOther, w.Code)
		return w.Result().Cookies()[0]
	}
	get := func(h http.Handler, c *http.Cookie) int {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.AddCookie(c)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	cookie := login(oldH, "old-token-0123456789")
	require.Equal(t, http.StatusOK, get(oldH, cookie))
	require.Equal(t, http.StatusUnauthorized, get(newH, cookie), "the token changed: the session ended")
	se := keep.byID[sessionIDHash(cookie.Value)]
	require.NotContains(t, keep.byID, cookie.Value, "kept by its hash, never by the id")
	require.Equal(t, TokenFingerprint("old-token-0123456789"), se.Token)

	now = now.Add(30 * time.Second)
	require.Equal(t, http.StatusOK, get(oldH, cookie))
	require.Equal(t, se.LastSeenAt, keep.byID[sessionIDHash(cookie.Value)].LastSeenAt, "renewed at most once a minute")
	now = now.Add(time.Minute)
	require.Equal(t, http.StatusOK, get(oldH, cookie))
	require.Equal(t, now, keep.byID[sessionIDHash(cookie.Value)].LastSeenAt)

	now = now.Add(time.Hour)
	require.Equal(t, http.StatusUnauthorized, get(oldH, cookie), "expired")

	fresh := login(oldH, "old-token-0123456789")
	require.Equal(t, 1, keep.len(), "a login prunes the expired session")
	login(newH, "new-token-0123456789")
	require.Equal(t, 1, keep.len(), "a login under the new token prunes the old token's sessions")
	require.Equal(t, http.StatusUnauthorized, get(oldH, fresh))

	for range maxMemorySessions + 50 {
		require.NoError(t, keep.CreateOperatorSession(context.Background(), OperatorSession{
			IDHash: sessionIDHash(strconv.Itoa(rand.Int())), Token: "t", ExpiresAt: now.Add(time.Hour)}))
	}
	require.LessOrEqual(t, keep.len(), maxMemorySessions)
}

// The per-client budgets are bounded in number.
func TestAttemptsTrackBoundedClients(t *testing.T) {
	t.Parallel()
	a := NewAttempts(DefaultAttemptLimits())
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
