package forgehttp

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CheckRetry retries HTTP 408 and 429 for every method (the server did not act on the
// request), and 5xx except 501 for a request a repeat cannot do twice: a read (GET, HEAD,
// OPTIONS) or a write that sets a state (PUT, PATCH, DELETE) unless its context says
// ApplyOnce. A POST answered 5xx, or an ApplyOnce write, is not retried: the forge may have
// acted on it before the answer was lost (a proxy's 502 while GitLab created the note), and a
// repeat would post a second comment or try a merge already made. The error goes back to the
// caller (forge.ErrUnavailable), whose next pass finds what was done by its marker before it
// writes again (spec/reliability.md). A transport error is retried only when the connection
// was never made (dial or DNS failure), since the request may otherwise have been applied. It
// stops when ctx is done. Its shape is go-retryablehttp's CheckRetry, which client-go also
// takes; ctx is the request's.
func CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return NeverSent(err), nil
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
		return true, nil
	}
	if resp.StatusCode < 500 || resp.StatusCode == http.StatusNotImplemented {
		return false, nil
	}
	method := http.MethodGet
	if resp.Request != nil {
		method = resp.Request.Method
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true, nil
	case http.MethodPut, http.MethodPatch, http.MethodDelete:
		return !appliedOnce(ctx), nil
	default:
		return false, nil
	}
}

type applyOnceKey struct{}

// ApplyOnce marks ctx's request as one a repeat does not leave as it was (GitLab's merge, a
// PUT that a second time answers 405 for a merge request it just merged): CheckRetry retries
// it only when the forge did not act on it (408, 429, a connection never made).
func ApplyOnce(ctx context.Context) context.Context {
	return context.WithValue(ctx, applyOnceKey{}, true)
}

func appliedOnce(ctx context.Context) bool {
	once, _ := ctx.Value(applyOnceKey{}).(bool)
	return once
}

// NeverSent reports whether err happened before the request reached the server.
func NeverSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) && !dns.IsNotFound
}

// Backoff waits what the server asks after a 429 or 503 (RetryAfter), else doubles from
// minWait with up to 25% jitter; never more than maxWait. Its shape is go-retryablehttp's
// Backoff.
func Backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if d, ok := RetryAfter(resp.Header, time.Now()); ok {
			return min(max(d, 0), maxWait)
		}
	}
	d := float64(minWait) * math.Pow(2, float64(attempt))
	d += d * 0.25 * rand.Float64()
	if d > float64(maxWait) {
		return maxWait
	}
	return time.Duration(d)
}

// RetryAfter reads Retry-After (delay seconds or HTTP date, RFC 9110 §10.2.3) and then
// RateLimit-Reset (Unix seconds, GitLab's rate-limit headers; Forgejo does not send it).
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.Duration(s) * time.Second, true
		}
		if t, err := http.ParseTime(v); err == nil {
			return t.Sub(now), true
		}
	}
	if v := strings.TrimSpace(h.Get("RateLimit-Reset")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
			return time.Unix(s, 0).Sub(now), true
		}
	}
	return 0, false
}
