package httpserve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func limits(concurrent int) Limits {
	return Limits{ReadTimeout: time.Minute, MaxConcurrent: concurrent, MaxReaders: 16, MaxBodyBytes: 1 << 20,
		BodyMemory: 8 << 20}
}

// At most MaxConcurrent requests are handled at once; the others wait for a slot and are then
// served.
func TestStagesQueueBeyondN(t *testing.T) {
	var inside, most atomic.Int32
	release := make(chan struct{})
	h := NewStages(limits(2), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
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
			resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("a body"))
			if err == nil {
				codes[i] = resp.StatusCode
				_ = resp.Body.Close()
			}
		}()
	}
	require.Eventually(t, func() bool { return h.Stats().Waiting == 4 }, 10*time.Second, 5*time.Millisecond)
	require.EqualValues(t, 2, h.Stats().Handling)
	close(release)
	wg.Wait()
	require.EqualValues(t, 2, most.Load(), "never more than n requests inside")
	for _, c := range codes {
		require.Equal(t, http.StatusAccepted, c)
	}
	require.Zero(t, h.Stats().BodyBytes, "every body's memory is given back")
}

// A request that waits longer than the wait bound for a slot is answered 503 with Retry-After.
func TestStagesWaitBound(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	defer close(release)
	l := limits(1)
	l.ReadTimeout = 10 * time.Millisecond
	h := NewStages(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	<-entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
}

// slowClient sends the headers of a POST declaring n bytes and the first byte of its body,
// then nothing; closing the returned connection ends it.
func slowClient(t *testing.T, addr string, n int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nx", n)
	require.NoError(t, err)
	return conn
}

// Clients sending their bodies slowly hold readers, not the handling slot: with one slot and
// ten of them, a whole request is handled at once.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	var handled atomic.Int32
	h := NewStages(limits(1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		handled.Add(1)
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(b)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close) // after the slow clients' connections are closed (cleanups run last first)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for range 10 {
		slowClient(t, addr, 1000)
	}
	require.Eventually(t, func() bool { return h.Stats().Reading == 10 }, 10*time.Second, 5*time.Millisecond)
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"whole":true}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, `{"whole":true}`, string(b), "the handler reads the body from memory, intact")
	require.EqualValues(t, 1, handled.Load())
	require.EqualValues(t, 10, h.Stats().Reading, "the slow clients are still being read")
}

// The handler's own cap still answers a body over MaxBodyBytes, declared or chunked; a body
// of exactly the cap is read whole.
func TestBodyOverTheCapReachesTheHandlersCap(t *testing.T) {
	const maxBody = 10 << 10
	l := limits(4)
	l.MaxBodyBytes = maxBody
	h := NewStages(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = fmt.Fprint(w, len(b))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for name, tc := range map[string]struct {
		body    []byte
		chunked bool
		want    int
		got     string
	}{
		"exactly the cap":          {bytes.Repeat([]byte("a"), maxBody), false, http.StatusOK, fmt.Sprint(maxBody)},
		"exactly the cap, chunked": {bytes.Repeat([]byte("a"), maxBody), true, http.StatusOK, fmt.Sprint(maxBody)},
		"one byte over":            {bytes.Repeat([]byte("a"), maxBody+1), false, http.StatusRequestEntityTooLarge, ""},
		"over, chunked":            {bytes.Repeat([]byte("a"), 3*maxBody), true, http.StatusRequestEntityTooLarge, ""},
	} {
		t.Run(name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // no length known: sent chunked
			}
			resp, err := http.Post(srv.URL, "text/plain", body)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
			if tc.got != "" {
				require.Equal(t, tc.got, string(b))
			}
		})
	}
	require.Eventually(t, func() bool { return h.Stats().BodyBytes == 0 }, 10*time.Second, 5*time.Millisecond)
}

// Bodies held in memory are bounded by BodyMemory: past it a reader waits, and gets 503 with
// Retry-After when the wait runs out; once the memory is given back, bodies are read again.
func TestBodyMemoryBound(t *testing.T) {
	const maxBody = 8 << 10
	l := limits(4)
	l.MaxBodyBytes, l.BodyMemory, l.ReadTimeout = maxBody, maxBody+1, 50*time.Millisecond
	h := NewStages(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	hog := slowClient(t, addr, maxBody)
	_, err := hog.Write(bytes.Repeat([]byte("b"), 5<<10)) // its buffer grows to the whole body
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.Stats().BodyBytes == maxBody }, 10*time.Second, 5*time.Millisecond)

	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("c", 4<<10)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "no memory left for a second body")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	_ = hog.Close()
	require.Eventually(t, func() bool { return h.Stats().BodyBytes == 0 }, 10*time.Second, 5*time.Millisecond)
	resp, err = http.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("c", 4<<10)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// A body the server's read timeout cuts off is answered with an error status, never 2xx: a
// forge takes a 2xx as delivered and never sends it again, and nothing was stored.
func TestBodyCutByTheReadTimeoutIsAnError(t *testing.T) {
	var handled atomic.Int32
	l := limits(1)
	l.ReadTimeout = 300 * time.Millisecond
	srv := New(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = fmt.Fprintf(c, "POST /webhooks/fj HTTP/1.1\r\nHost: alfred\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"action\":")
	require.NoError(t, err)
	// Then nothing more: the client stalls past the read timeout, still connected, and reads
	// the answer (the read waits for it; the deadline only keeps a hang from lasting).
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "an answer, not a closed connection")
	_ = resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	require.Zero(t, handled.Load(), "the handler never sees a cut body")
}

// A whole request waiting for a handling slot whose client half-closes its side (net/http then
// ends the request's context) is answered 503 with Retry-After: nothing was handled, and an
// unwritten answer would go out as 200, which a forge takes as delivered.
func TestWaitEndedByTheClientIsNotAnAnswerOfSuccess(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	defer close(release)
	var handled atomic.Int32
	h := NewStages(limits(1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if handled.Add(1) == 1 {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	go func() {
		if resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("holds the slot")); err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-entered
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.Stats().Waiting == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.EqualValues(t, 1, handled.Load(), "the waiting request was not handled")
}

// A body read whole is handed to the handler as a *Body: Unread gives what is left of it after
// a partial read, the buffer itself rather than a copy.
func TestBodyUnread(t *testing.T) {
	var got []byte
	var shared bool
	h := NewStages(limits(1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := r.Body.(*Body)
		require.True(t, ok, "the body is in memory")
		head := make([]byte, 5)
		_, err := io.ReadFull(b, head)
		require.NoError(t, err)
		got = bytes.Clone(b.Unread())
		b.Unread()[0] = ';'
		shared = b.Unread()[0] == ';'
		require.NoError(t, b.Close())
	}))
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hello, world"))
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, ", world", string(got))
	require.True(t, shared, "Unread returns the buffer, not a copy")
}
