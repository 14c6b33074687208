package forgehttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An answer without end fails once past the cap instead of being read whole; one of exactly
// the cap is read whole.
func TestCapAnswers(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	for _, tc := range []struct {
		size int
		ok   bool
	}{{limit, true}, {limit + 1, false}, {8 * limit, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("x", tc.size))
		}))
		c := &http.Client{Transport: CapAnswers(nil, limit)}
		resp, err := c.Get(srv.URL)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		srv.Close()
		if tc.ok {
			require.NoError(t, err)
			require.Len(t, b, tc.size)
			continue
		}
		require.ErrorContains(t, err, "larger than")
		require.LessOrEqual(t, len(b), limit)
	}
}
