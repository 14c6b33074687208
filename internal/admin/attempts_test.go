package admin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/alfred-bot/alfred/internal/admin"
)

const attemptToken = "0123456789abcdef-page-token"

// slowRefill is a rate no test outlives: a spent budget stays spent.
const slowRefill = rate.Limit(1e-6)

func login(h http.Handler, addr, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func bearer(h http.Handler, addr, auth string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
	r.Header.Set("Authorization", auth)
	r.RemoteAddr = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func requireTooMany(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, w.Code, w.Body.String())
	s, err := strconv.Atoi(w.Header().Get("Retry-After"))
	require.NoError(t, err, "Retry-After in seconds")
	require.Positive(t, s)
}

var page = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("page")) })

// One address gets Burst wrong logins, then 429 with Retry-After, even with the right token;
// another address still signs in.
func TestLoginAttemptsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	h := admin.PageAuthLimits("/ui", attemptToken, admin.AttemptLimits{PerAddress: slowRefill, Burst: 5}, page)
	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, login(h, "192.0.2.1:1000", "guess-"+strconv.Itoa(i)).Code)
	}
	requireTooMany(t, login(h, "192.0.2.1:1001", "guess-5"))
	requireTooMany(t, login(h, "192.0.2.1:1002", attemptToken))
	require.Equal(t, http.StatusSeeOther, login(h, "192.0.2.2:1000", attemptToken).Code, "another address signs in")
	// The Bearer header shares the address's budget.
	requireTooMany(t, bearer(h, "192.0.2.1:1003", "Bearer "+attemptToken))
}

// Issue 26: a flood of wrong tokens from many other clients (each under its own budget) never
// refuses the operator's right token, nor a Bearer header, from a client of its own; the
// clients tracked stay under the ceiling.
func TestOthersCannotLockTheOperatorOut(t *testing.T) {
	t.Parallel()
	h := admin.PageAuth("/ui", attemptToken, page)
	for i := range 400 {
		addr := fmt.Sprintf("198.51.%d.%d:1", 100+i/250, i%250)
		for range admin.DefaultAttemptBurst {
			require.Equal(t, http.StatusUnauthorized, login(h, addr, "guess").Code)
		}
		requireTooMany(t, login(h, addr, "guess"))
	}
	require.Equal(t, http.StatusSeeOther, login(h, "203.0.113.50:1", attemptToken).Code)
	require.Equal(t, http.StatusOK, bearer(h, "203.0.113.51:1", "Bearer "+attemptToken).Code)
	// An IPv6 host is one client by its /64: changing the interface id buys no budget.
	for i := range admin.DefaultAttemptBurst {
		require.Equal(t, http.StatusUnauthorized, login(h, fmt.Sprintf("[2001:db8:1:2::%x]:1", i+1), "guess").Code)
	}
	requireTooMany(t, login(h, "[2001:db8:1:2::ffff]:1", "guess"))
	require.Equal(t, http.StatusSeeOther, login(h, "[2001:db8:1:3::1]:1", attemptToken).Code)
}

// A right token uses no budget: the holder is never slowed.
func TestRightTokenUsesNoBudget(t *testing.T) {
	t.Parallel()
	h := admin.PageAuthLimits("/ui", attemptToken, admin.AttemptLimits{PerAddress: slowRefill, Burst: 3}, page)
	for range 20 {
		require.Equal(t, http.StatusOK, bearer(h, "192.0.2.9:1", "Bearer "+attemptToken).Code)
		require.Equal(t, http.StatusSeeOther, login(h, "192.0.2.9:1", attemptToken).Code)
	}
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, bearer(h, "192.0.2.9:1", "Bearer wrong").Code)
	}
	requireTooMany(t, bearer(h, "192.0.2.9:1", "Bearer wrong"))
}

// The default limits of PageAuth and RequireToken answer 429 after DefaultAttemptBurst wrong
// tries from one address (refilled one every 6 s, so a few more tries may pass on a slow
// machine before the 429).
func TestDefaultAttemptLimits(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]http.Handler{
		"PageAuth":     admin.PageAuth("/ui", attemptToken, page),
		"RequireToken": admin.RequireToken(attemptToken, page),
	} {
		t.Run(name, func(t *testing.T) {
			refused := 0
			for i := 0; ; i++ {
				w := bearer(h, "203.0.113.7:1", "Bearer guess-"+strconv.Itoa(i))
				if w.Code == http.StatusTooManyRequests {
					requireTooMany(t, w)
					break
				}
				require.Equal(t, http.StatusUnauthorized, w.Code)
				refused++
				require.Less(t, refused, 2*admin.DefaultAttemptBurst, "never limited")
			}
			require.GreaterOrEqual(t, refused, admin.DefaultAttemptBurst)
		})
	}
}

// The scheme of the Authorization header is case-insensitive (RFC 9110 §11.1).
func TestPageAuthBearerSchemeAnyCase(t *testing.T) {
	t.Parallel()
	h := admin.PageAuth("/ui", attemptToken, page)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		require.Equal(t, http.StatusOK, bearer(h, "192.0.2.3:1", scheme+" "+attemptToken).Code, scheme)
	}
	require.Equal(t, http.StatusUnauthorized, bearer(h, "192.0.2.3:1", "Basic "+attemptToken).Code)
}

// FrameHeaders sets the anti-framing and no-sniff headers on every answer, 401 included.
func TestFrameHeaders(t *testing.T) {
	t.Parallel()
	h := admin.FrameHeaders(admin.RequireToken(attemptToken, page))
	for _, auth := range []string{"", "Bearer " + attemptToken} {
		w := bearer(h, "192.0.2.4:1", auth)
		require.Equal(t, "frame-ancestors 'none'", w.Header().Get("Content-Security-Policy"))
		require.Equal(t, "DENY", w.Header().Get("X-Frame-Options"))
		require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	}
}
