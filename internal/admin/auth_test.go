package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequireToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("state")) })
	for name, tc := range map[string]struct {
		token, header string
		want          int
	}{
		"no header":      {"s3cret-admin", "", http.StatusUnauthorized},
		"wrong token":    {"s3cret-admin", "Bearer nope", http.StatusUnauthorized},
		"prefix":         {"s3cret-admin", "Bearer s3cret", http.StatusUnauthorized},
		"basic scheme":   {"s3cret-admin", "Basic s3cret-admin", http.StatusUnauthorized},
		"bare token":     {"s3cret-admin", "s3cret-admin", http.StatusUnauthorized},
		"empty token":    {"", "Bearer ", http.StatusUnauthorized},
		"right token":    {"s3cret-admin", "Bearer s3cret-admin", http.StatusOK},
		"token + suffix": {"s3cret-admin", "Bearer s3cret-admin ", http.StatusUnauthorized},
		// RFC 9110 §11.1: the scheme is case-insensitive.
		"lower-case scheme": {"s3cret-admin", "bearer s3cret-admin", http.StatusOK},
		"upper-case scheme": {"s3cret-admin", "BEARER s3cret-admin", http.StatusOK},
		"two spaces":        {"s3cret-admin", "Bearer  s3cret-admin", http.StatusOK},
		"scheme only":       {"s3cret-admin", "bearer", http.StatusUnauthorized},
		"lower-case basic":  {"s3cret-admin", "basic s3cret-admin", http.StatusUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/mailboxes/1/session", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			w := httptest.NewRecorder()
			RequireToken(tc.token, ok).ServeHTTP(w, r)
			require.Equal(t, tc.want, w.Code)
			if tc.want != http.StatusOK {
				require.NotContains(t, w.Body.String(), "state")
				require.NotEmpty(t, w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}
