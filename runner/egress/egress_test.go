package egress_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

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
	p := egress.Serve(ln, allow, egress.Options{OnRefused: func(target string) { mu.Lock(); seen = append(seen, target); mu.Unlock() }})
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
