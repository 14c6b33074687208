package forgetest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// listen serves h on a new httptest server that closes when t ends, and returns its URL.
func listen(t testing.TB, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// intercept records r for Requests and answers it when a failure is due: the next status of
// FailNext through fail, else a pending RateLimitNext through rateLimit with the Retry-After
// seconds. It reports whether it answered r, so that the stand-in must not.
func (m *model) intercept(r *http.Request, fail func(status int), rateLimit func(after int)) bool {
	m.logRequest(r.Method + " " + r.URL.RequestURI())
	if st := m.takeFailure(); st != 0 {
		fail(st)
		return true
	}
	if after, ok := m.takeRateLimit(); ok {
		rateLimit(after)
		return true
	}
	return false
}

// pathSegments splits an escaped API path below the API prefix ("issues/1/comments") into its
// unescaped segments; an escape that does not decode is an error.
func pathSegments(rest string) ([]string, error) {
	var seg []string
	for _, p := range strings.Split(strings.Trim(rest, "/"), "/") {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, err
		}
		seg = append(seg, u)
	}
	return seg, nil
}

// EmptyFirstList returns an http.RoundTripper that answers the first GET whose path ends in
// suffix (for example "/merge_requests") with 200 and an empty JSON list, and sends every other
// request with http.DefaultTransport. A client behind it misses an object on its first lookup,
// as when someone creates it between the client's lookup and its create. It is not safe for
// concurrent use.
func EmptyFirstList(suffix string) http.RoundTripper { return &emptyFirstList{suffix: suffix} }

type emptyFirstList struct {
	suffix string
	done   bool
}

func (e *emptyFirstList) RoundTrip(r *http.Request) (*http.Response, error) {
	if !e.done && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, e.suffix) {
		e.done = true
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		_, _ = rec.WriteString("[]")
		return rec.Result(), nil
	}
	return http.DefaultTransport.RoundTrip(r)
}
