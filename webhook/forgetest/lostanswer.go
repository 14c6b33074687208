package forgetest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// LostAnswer is a proxy in front of a stand-in whose first request matching lose reaches the
// stand-in, which acts on it, while its answer is lost on the way back: the client gets 502 Bad
// Gateway, as from a proxy (nginx, GitLab Workhorse) that timed out while its upstream
// completed. Every other request passes through.
type LostAnswer struct {
	// URL is the proxy's base URL, for the client under test.
	URL  string
	lost atomic.Bool
}

// NewLostAnswer starts a LostAnswer in front of the stand-in at upstream; it is closed when tb
// ends.
func NewLostAnswer(tb testing.TB, upstream string, lose func(*http.Request) bool) *LostAnswer {
	tb.Helper()
	up, err := url.Parse(upstream)
	if err != nil {
		tb.Fatalf("forgetest: lost answer: %v", err)
	}
	proxy := httputil.NewSingleHostReverseProxy(up)
	l := &LostAnswer{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lose(r) && l.lost.CompareAndSwap(false, true) {
			proxy.ServeHTTP(httptest.NewRecorder(), r)              // the stand-in acts…
			http.Error(w, "502 Bad Gateway", http.StatusBadGateway) // …and its answer is lost
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(front.Close)
	l.URL = front.URL
	return l
}

// Lost reports whether an answer was lost.
func (l *LostAnswer) Lost() bool { return l.lost.Load() }
