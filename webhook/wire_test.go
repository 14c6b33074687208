package webhook_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// wireRequest serialises req as it goes on the wire (HTTP/1.1, kept alive).
func wireRequest(tb testing.TB, req *http.Request) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// sendRound sends the serialised requests to addr over clients kept-alive connections, each
// sender writing its next request once the answer to the previous one is read, like a
// forge's delivery workers, and returns the acknowledgement latency of each. A load generator
// in the manner of wrk: no request is built, signed or routed during the round, so its cost is
// the writes and the reads. An answer other than 202 is an error.
func sendRound(addr string, clients int, reqs [][]byte) ([]time.Duration, error) {
	var next atomic.Int64
	lat := make([]time.Duration, len(reqs))
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[c] = sendFrom(addr, reqs, lat, &next)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return lat, nil
}

// sendFrom is one sender of sendRound: it takes the next unsent request until none is left.
func sendFrom(addr string, reqs [][]byte, lat []time.Duration, next *atomic.Int64) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		i := int(next.Add(1) - 1)
		if i >= len(reqs) {
			return nil
		}
		t0 := time.Now()
		if _, err := conn.Write(reqs[i]); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		lat[i] = time.Since(t0)
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("request %d: status %d", i, resp.StatusCode)
		}
	}
}
