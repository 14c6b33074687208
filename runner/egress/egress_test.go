package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/egress"
)

func TestAllowlist(t *testing.T) {
	t.Parallel()
	a, err := egress.ParseAllowlist([]string{"api.anthropic.com:443", "*.example.org:443", "127.0.0.1:11434", "[::1]:8080", "Local.Test.:80"})
	require.NoError(t, err)
	for hp, want := range map[string]bool{
		"api.anthropic.com:443":  true,
		"API.Anthropic.com.:443": true,
		"api.anthropic.com:80":   false,
		"evil.anthropic.com:443": false,
		"a.example.org:443":      true,
		"a.b.example.org:443":    true,
		"example.org:443":        false,
		"evilexample.org:443":    false,
		"127.0.0.1:11434":        true,
		"127.0.0.1:5432":         false,
		"[::1]:8080":             true,
		"local.test:80":          true,
		"api.anthropic.com":      false,
	} {
		require.Equal(t, want, a.Allows(hp), hp)
	}
	for _, bad := range []string{"api.anthropic.com", "host:0", "host:70000", ":443", "a.*.org:443", "*.:443"} {
		_, err := egress.ParseAllowlist([]string{bad})
		require.Error(t, err, bad)
	}
}

// TestProxyAllowsOnlyTheList drives the proxy as an agent's HTTP client does (HTTPS_PROXY:
// CONNECT; HTTP_PROXY: absolute URLs): the listed server answers through it, another server is
// refused with 403 and the refusal is counted and reported.
func TestProxyAllowsOnlyTheList(t *testing.T) {
	t.Parallel()
	allowed := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "on the list") }))
	t.Cleanup(allowed.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain on the list") }))
	t.Cleanup(plain.Close)
	offList := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the off-list server was reached: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(offList.Close)

	allow, err := egress.ParseAllowlist([]string{hostPort(allowed.URL), hostPort(plain.URL)})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []string
	p := egress.Serve(ln, allow, egress.Options{OnRefused: func(target string, _ bool) { mu.Lock(); seen = append(seen, target); mu.Unlock() }})
	t.Cleanup(func() { require.NoError(t, p.Close()) })

	proxyURL, _ := url.Parse("http://" + p.Addr().String())
	tr := allowed.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxyURL)
	c := &http.Client{Transport: tr}

	body := get(t, c, allowed.URL, http.StatusOK)
	require.Equal(t, "on the list", body)
	require.Equal(t, "plain on the list", get(t, c, plain.URL, http.StatusOK))

	// Plain HTTP to an off-list server: 403 from the proxy, naming the destination.
	require.Contains(t, get(t, c, offList.URL, http.StatusForbidden), "egress to "+hostPort(offList.URL)+" refused")
	// CONNECT to it (what an HTTPS client does): refused before any byte reaches it.
	_, err = c.Get(strings.Replace(offList.URL, "http://", "https://", 1))
	require.Error(t, err)
	require.Contains(t, err.Error(), "Forbidden")

	require.Equal(t, []egress.Refusal{{Target: hostPort(offList.URL), Count: 2}}, p.Refused())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{hostPort(offList.URL), hostPort(offList.URL)}, seen)
}

func get(t *testing.T, c *http.Client, u string, status int) string {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, string(b))
	return string(b)
}

func hostPort(u string) string {
	p, _ := url.Parse(u)
	return p.Host
}

// A run chooses the names it asks for: a loop over made-up hosts keeps MaxRefusedTargets of
// them and counts the rest together (each reported, each kept name first once), and a name
// with bytes that are not UTF-8 ("%ff" in a CONNECT host, which Go decodes) or with control
// characters is kept printable, so that the run's stored output and Alfred's log take it.
func TestProxyRefusalsAreBoundedAndPrintable(t *testing.T) {
	t.Parallel()
	allow, err := egress.ParseAllowlist([]string{"allowed.example:443"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	reports, firsts := 0, 0
	p := egress.Serve(ln, allow, egress.Options{OnRefused: func(_ string, first bool) {
		mu.Lock()
		defer mu.Unlock()
		reports++
		if first {
			firsts++
		}
	}})
	t.Cleanup(func() { require.NoError(t, p.Close()) })

	connect := func(target string) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	}
	connect("b%ff.example:99999")
	const made = egress.MaxRefusedTargets + 36
	for i := range made {
		connect(fmt.Sprintf("h%d.example:443", i))
	}
	connect("h0.example:443") // kept: counted on its own

	got := p.Refused()
	require.Len(t, got, egress.MaxRefusedTargets+1)
	total := 0
	for _, r := range got {
		require.True(t, utf8.ValidString(r.Target), "%q", r.Target)
		require.NotContains(t, r.Target, "\xff")
		total += r.Count
	}
	require.Equal(t, made+2, total, "every refusal counted")
	last := got[len(got)-1]
	require.Equal(t, egress.OtherTargets, last.Target)
	require.Equal(t, made+1-egress.MaxRefusedTargets, last.Count)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, made+2, reports)
	require.Equal(t, egress.MaxRefusedTargets+1, firsts, "each kept name and the others once")
}
