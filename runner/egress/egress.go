// Package egress is the way out of a run's network on Docker: an allowlisting forward proxy
// (HTTP CONNECT and plain HTTP, github.com/elazarl/goproxy) that lets a run reach only the
// host:port pairs of its allowlist and records every connection it refuses.
//
// The Docker runtime (runner/docker) starts one Proxy per run, listening on the gateway
// address of the run's own internal network, so whatever reaches a Proxy comes from that one
// run and each refusal is the run's. The container finds it through HTTP_PROXY and
// HTTPS_PROXY (runner.Compile); a connection that ignores them meets the internal network,
// which routes nowhere. spec/security.md lists the boundary and its tests.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/elazarl/goproxy"
)

// Port is the port a run's Proxy listens on, on its network's gateway address; ProxyHost is the
// name the container resolves to that address (the runtime adds it to the container's hosts
// file). ProxyURL is what HTTP_PROXY and HTTPS_PROXY say.
const (
	Port      = 3128
	ProxyHost = "alfred-egress"
	ProxyURL  = "http://alfred-egress:3128"
)

// Allowlist is a set of host:port pairs a run may connect to. An entry is "host:port" (a name
// or an IP address, "[::1]:port" for IPv6) or "*.domain:port", which matches every name ending
// in ".domain" (not "domain" itself). Names compare case-insensitively, a trailing dot ignored.
// The zero value allows nothing.
type Allowlist struct {
	exact  map[string]bool
	suffix []string // ".domain:port"
}

// ParseAllowlist reads entries (see Allowlist). Errors: an entry without a port, with a port
// outside 1–65535, or with an empty host.
func ParseAllowlist(entries []string) (Allowlist, error) {
	a := Allowlist{exact: map[string]bool{}}
	for _, e := range entries {
		host, port, err := splitHostPort(e)
		if err != nil {
			return Allowlist{}, fmt.Errorf("egress allowlist entry %q: %w", e, err)
		}
		if rest, ok := strings.CutPrefix(host, "*."); ok {
			if rest == "" || strings.Contains(rest, "*") {
				return Allowlist{}, fmt.Errorf("egress allowlist entry %q: a wildcard is one leading \"*.\" before a domain", e)
			}
			a.suffix = append(a.suffix, "."+rest+":"+port)
			continue
		}
		if strings.Contains(host, "*") {
			return Allowlist{}, fmt.Errorf("egress allowlist entry %q: a wildcard is one leading \"*.\" before a domain", e)
		}
		a.exact[net.JoinHostPort(host, port)] = true
	}
	return a, nil
}

// splitHostPort returns the normalised host (lower case, no trailing dot, no IPv6 brackets) and
// the port of "host:port".
func splitHostPort(hostport string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(strings.TrimSpace(hostport))
	if err != nil {
		return "", "", errors.New("want host:port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q is not 1–65535", port)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return "", "", errors.New("empty host")
	}
	return host, strconv.Itoa(n), nil
}

// Allows reports whether hostport ("host:port") is on the list.
func (a Allowlist) Allows(hostport string) bool {
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return false
	}
	if a.exact[net.JoinHostPort(host, port)] {
		return true
	}
	for _, s := range a.suffix {
		if strings.HasSuffix(host+":"+port, s) {
			return true
		}
	}
	return false
}

// Refusal is one destination a Proxy refused, and how many times.
type Refusal struct {
	// Target is the host:port the run asked for (as it asked, normalised).
	Target string `json:"target"`
	// Count is how many requests for it were refused.
	Count int `json:"count"`
}

// String is "host:port" or "host:port (n times)".
func (r Refusal) String() string {
	if r.Count == 1 {
		return r.Target
	}
	return fmt.Sprintf("%s (%d times)", r.Target, r.Count)
}

// Proxy is one run's allowlisting forward proxy, serving on one listener until Close.
type Proxy struct {
	allow     Allowlist
	onRefused func(target string, first bool)
	ln        net.Listener
	srv       *http.Server

	mu      sync.Mutex
	refused map[string]int
	others  int // refusals of targets beyond MaxRefusedTargets
}

// MaxRefusedTargets bounds the distinct destinations a Proxy keeps (Refused): a run that asks
// for ever new names (a loop over made-up hosts) costs Alfred's memory, the run's stored output
// and its log no more than this; the refusals of the others are counted together.
const MaxRefusedTargets = 64

// maxTargetBytes bounds the length of a kept destination.
const maxTargetBytes = 260

// OtherTargets is the Target of the Refusal counting the refusals beyond MaxRefusedTargets.
const OtherTargets = "other destinations"

// dialTimeout bounds a connection to an allowed destination.
const dialTimeout = 30 * time.Second

// Options are a Proxy's hooks.
type Options struct {
	// OnRefused, when set, is called once per refused request with the normalised host:port
	// asked for (as Refused names it: OtherTargets beyond MaxRefusedTargets); first is true for
	// the first refusal of that target, so that a caller can log each destination once.
	OnRefused func(target string, first bool)
	// Dial connects to an allowed destination (a net.Dialer with a 30 s timeout when nil).
	// Tests resolve their stand-in names to loopback servers with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Serve starts a Proxy on ln (which it then owns) allowing allow. A refused request gets 403
// Forbidden naming the destination, and is counted (Refused) and reported (Options.OnRefused).
// Allowed requests are dialled from Alfred's host: CONNECT is tunnelled as it is (no TLS
// interception), plain HTTP is forwarded.
func Serve(ln net.Listener, allow Allowlist, opts Options) *Proxy {
	p := &Proxy{allow: allow, onRefused: opts.OnRefused, ln: ln, refused: map[string]int{}}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout}).DialContext
	}
	// Neither Alfred's own proxy settings nor its TLS exceptions apply to a run's traffic.
	gp.Tr = &http.Transport{DialContext: dial, ResponseHeaderTimeout: 5 * time.Minute}
	gp.ConnectDial = func(network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		defer cancel()
		return dial(ctx, network, addr)
	}
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		target := withPort(host, "80") // goproxy dials a portless CONNECT on :80
		if p.allow.Allows(target) {
			return goproxy.OkConnect, host
		}
		p.refuse(target)
		ctx.Resp = forbidden(ctx.Req, target)
		return goproxy.RejectConnect, host
	})
	gp.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		port := "80"
		if r.URL.Scheme == "https" {
			port = "443"
		}
		target := withPort(r.URL.Host, port)
		if p.allow.Allows(target) {
			return r, nil
		}
		p.refuse(target)
		return r, forbidden(r, target)
	})
	p.srv = &http.Server{Handler: gp, ReadHeaderTimeout: time.Minute}
	go func() { _ = p.srv.Serve(ln) }()
	return p
}

// withPort returns host:port, adding def when host has no port.
func withPort(host, def string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), def)
}

func forbidden(r *http.Request, target string) *http.Response {
	return goproxy.NewResponse(r, goproxy.ContentTypeText, http.StatusForbidden,
		"alfred: egress to "+target+" refused: not on runner.egress.allow\n")
}

// refuse counts a refusal of target, kept as valid UTF-8 without control characters and cut to
// maxTargetBytes (a run chooses these bytes, and they reach the run's stored output and
// Alfred's log), and reports it.
func (p *Proxy) refuse(target string) {
	if h, port, err := splitHostPort(target); err == nil {
		target = net.JoinHostPort(h, port)
	}
	target = printable(target)
	p.mu.Lock()
	n, kept := p.refused[target]
	switch {
	case kept || len(p.refused) < MaxRefusedTargets:
		p.refused[target] = n + 1
	default:
		target, n = OtherTargets, p.others
		p.others++
	}
	p.mu.Unlock()
	if p.onRefused != nil {
		p.onRefused(target, n == 0)
	}
}

// printable returns s as valid UTF-8 with every control character written as '?', cut to
// maxTargetBytes (on a rune boundary).
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	if len(s) > maxTargetBytes {
		cut := maxTargetBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Addr is the address the Proxy listens on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Refused returns the destinations refused so far, sorted by target: at most
// MaxRefusedTargets of them, then, when a run asked for more, one Refusal named OtherTargets
// counting the refusals of all the others.
func (p *Proxy) Refused() []Refusal {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Refusal, 0, len(p.refused)+1)
	for t, n := range p.refused {
		out = append(out, Refusal{Target: t, Count: n})
	}
	slices.SortFunc(out, func(a, b Refusal) int { return strings.Compare(a.Target, b.Target) })
	if p.others > 0 {
		out = append(out, Refusal{Target: OtherTargets, Count: p.others})
	}
	return out
}

// Close stops the listener and ends the connections in flight (tunnels included: their
// connections were hijacked, so they end when the run's network goes).
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = p.srv.Close()
	}
	return err
}
