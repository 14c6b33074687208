package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/webhook/forgejo"
)

// The hostile findings at the HTTP edge, the doctor and the pages (spec/edge.md, "Slow
// clients", spec/operations.md): each test drives the command as an operator or an attacker
// would.

// runCaught is runArgs with a panic of the command reported as a failure instead of ending the
// test binary.
func runCaught(t *testing.T, args ...string) (r result) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("alfred %v panicked: %v", args, p)
		}
	}()
	return runArgs(t, args...)
}

// TestDoctorUnreachableDatabase: with a database that cannot be opened (nothing listens on the
// port) the doctor prints the failed database check with its fix and exits 1, without a panic.
func TestDoctorUnreachableDatabase(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "postgres://alfred:alfred-dev-7Kq2vN9x@127.0.0.1:1/alfred?sslmode=disable&connect_timeout=5")
	r := runCaught(t, "doctor", "--config", cfg)
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "[FAIL] database: ")
	require.Contains(t, r.stdout, "fix: start PostgreSQL")
	require.NotContains(t, r.stdout+r.stderr, "panic")
	require.NotContains(t, r.stdout+r.stderr, "s3cr3t")
	t.Logf("alfred doctor:\n%s", r.stdout)
}

// edgeSlowClients is how many clients trickle a body in TestSlowBodiesHoldNoHandlingSlot: more
// than the 64 handling slots of the default http.max_concurrent.
const edgeSlowClients = 100

// TestSlowBodiesHoldNoHandlingSlot connects 100 clients to `alfred serve` that send a valid
// delivery's headers and then its body at one byte a second, waits until the server holds all
// 100 (alfred_http_requests on /metrics), and sends a valid signed delivery. The slow clients
// hold no handling slot (the handling gauge is 0 while they trickle), and the delivery's 202
// arrives while every one of them is still connected (none was cut off or answered before it).
// With the bodies read inside the handling slots, 64 of the 100 hold every slot and the
// delivery waits until the read timeout cuts one off.
func TestSlowBodiesHoldNoHandlingSlot(t *testing.T) {
	t.Parallel()
	// A read timeout far longer than the test: a slow client is never cut off by it here.
	env := startHostileWith(t, 10*time.Minute)
	body := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")

	var cut atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	for i := range edgeSlowClients {
		conn, err := net.Dial("tcp", env.addr)
		require.NoError(t, err)
		head := fmt.Sprintf("POST /webhooks/forgejo HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"X-Forgejo-Event: issue_comment\r\nX-Forgejo-Event-Type: issue_comment\r\nX-Forgejo-Delivery: slow-%d\r\n"+
			"X-Forgejo-Signature: %s\r\nContent-Length: %d\r\n\r\n%c", env.addr, i, forgejo.Sign(hostileSecret, body), len(body), body[0])
		_, err = io.WriteString(conn, head)
		require.NoError(t, err)
		wg.Add(2)
		go func() { // the server ends the request: an answer or a close
			defer wg.Done()
			var b [1]byte
			if _, err := conn.Read(b[:]); err == nil || !errors.Is(err, net.ErrClosed) {
				select {
				case <-stop:
				default:
					cut.Add(1)
				}
			}
		}()
		go func() { // one more byte a second, never the whole body
			defer wg.Done()
			defer conn.Close()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for j := 1; j < len(body)-1; j++ {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write(body[j : j+1]); err != nil {
						return
					}
				}
			}
			<-stop
		}()
	}

	var held map[string]float64
	require.Eventually(t, func() bool {
		held = env.httpStages("webhook")
		return held["reading"]+held["waiting"]+held["handling"] == edgeSlowClients
	}, 2*time.Minute, 50*time.Millisecond, "the server never held the %d slow clients: %v", edgeSlowClients, held)
	require.Zero(t, held["handling"], "slow clients hold handling slots: %v", held)
	require.EqualValues(t, edgeSlowClients, held["reading"], "%v", held)

	valid := jsonEdit(t, body, func(d map[string]any) {
		at(d, "comment")["body"] = "a delivery among slow clients"
		at(d, "comment")["id"] = 990001
	})
	// No client timeout: the test fails by the answer's order, not its time.
	start := time.Now()
	a := env.send(&http.Client{}, fjCase("edge", "among-slow", "issue_comment", valid, 202))
	took := time.Since(start) // reported, not asserted
	require.Equal(t, http.StatusAccepted, a.status, a.body)
	require.Zero(t, cut.Load(), "slow clients were cut off or answered before the delivery was")
	after := env.httpStages("webhook")
	require.EqualValues(t, edgeSlowClients, after["reading"], "the slow clients are still being read: %v", after)
	t.Logf("stages with %d slow clients: before %v, after the 202 %v; the delivery was answered in %s",
		edgeSlowClients, held, after, took)
}

// httpStages reads alfred_http_requests of the named server from the admin listener's metrics.
func (e *hostileEnv) httpStages(server string) map[string]float64 {
	req, err := http.NewRequest(http.MethodGet, e.admin+"/metrics", nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+hostileAdminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	prefix := `alfred_http_requests{server="` + server + `",stage="`
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		stage, val, _ := strings.Cut(rest, `"} `)
		v, err := strconv.ParseFloat(val, 64)
		require.NoError(e.t, err, sc.Text())
		out[stage] = v
	}
	return out
}

// TestAdminListenerEdge drives the admin listener of `alfred serve`: every answer (pages, the
// login form, metrics, the status endpoint, 401, 404) forbids framing and sniffing; the scheme
// "bearer" in lower case is accepted; wrong logins from one address are answered 429 with
// Retry-After after admin.DefaultAttemptBurst of them.
func TestAdminListenerEdge(t *testing.T) {
	t.Parallel()
	env := startHostile(t)
	do := func(method, path, auth string, body io.Reader) *http.Response {
		req, err := http.NewRequest(method, env.admin+path, body)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}
	bearer := "Bearer " + hostileAdminToken
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/ui/", bearer, http.StatusOK},
		{"/ui/settings", bearer, http.StatusOK},
		{"/ui/mailboxes/999999", bearer, http.StatusNotFound},
		{"/ui/assets/alfred.css", bearer, http.StatusOK},
		{"/ui/login", "", http.StatusOK},
		{"/ui/", "", http.StatusUnauthorized},
		{"/metrics", bearer, http.StatusOK},
		{"/metrics", "", http.StatusUnauthorized},
		{"/mailboxes/1/session", "", http.StatusUnauthorized},
		{"/nothing", bearer, http.StatusNotFound},
		// RFC 9110 §11.1: the scheme is case-insensitive.
		{"/ui/", "bearer " + hostileAdminToken, http.StatusOK},
		{"/metrics", "bearer " + hostileAdminToken, http.StatusOK},
		{"/ui/", "BEARER " + hostileAdminToken, http.StatusOK},
	} {
		resp := do(http.MethodGet, c.path, c.auth, nil)
		require.Equal(t, c.want, resp.StatusCode, "%s with %q", c.path, c.auth)
		require.Equal(t, "frame-ancestors 'none'", cspFrameAncestors(resp.Header.Get("Content-Security-Policy")), c.path)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), c.path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), c.path)
	}

	refused := 0
	for i := 0; ; i++ {
		resp := do(http.MethodPost, "/ui/login", "", strings.NewReader("token=guess-"+strconv.Itoa(i)))
		if resp.StatusCode == http.StatusTooManyRequests {
			require.NotEmpty(t, resp.Header.Get("Retry-After"))
			require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
			break
		}
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		refused++
		require.Less(t, refused, 2*admin.DefaultAttemptBurst, "wrong logins never limited")
	}
	require.GreaterOrEqual(t, refused, admin.DefaultAttemptBurst)
	resp := do(http.MethodPost, "/ui/login", "", strings.NewReader("token="+hostileAdminToken))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "past the limit even the right token waits")
	// One budget per client for every way of presenting the token: the wrong logins spent it
	// for a Bearer header on /metrics too.
	resp = do(http.MethodGet, "/metrics", "Bearer guess-elsewhere", nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the login's budget is the Bearer header's")
	t.Logf("%d wrong logins answered 401, then 429", refused)
}

// cspFrameAncestors returns the frame-ancestors directive of a Content-Security-Policy.
func cspFrameAncestors(csp string) string {
	for _, d := range strings.Split(csp, ";") {
		if d = strings.TrimSpace(d); strings.HasPrefix(d, "frame-ancestors ") {
			return d
		}
	}
	return ""
}
