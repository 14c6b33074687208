package httpserve

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Limit lets n requests in at once; the others wait for a slot and are then served.
func TestLimitQueuesBeyondN(t *testing.T) {
	var inside, most atomic.Int32
	release := make(chan struct{})
	h := Limit(2, time.Minute, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := inside.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		inside.Add(-1)
		w.WriteHeader(http.StatusAccepted)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL, "text/plain", nil)
			if err == nil {
				codes[i] = resp.StatusCode
				_ = resp.Body.Close()
			}
		}()
	}
	require.Eventually(t, func() bool { return inside.Load() == 2 }, 10*time.Second, 5*time.Millisecond)
	close(release)
	wg.Wait()
	require.EqualValues(t, 2, most.Load(), "never more than n requests inside")
	for _, c := range codes {
		require.Equal(t, http.StatusAccepted, c)
	}
}

// A request that waits longer than the wait bound is answered 503 with Retry-After.
func TestLimitWaitBound(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := Limit(1, 10*time.Millisecond, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	<-entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
}
