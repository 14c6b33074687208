package forgehttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		"seconds":          {http.Header{"Retry-After": {"7"}}, 7 * time.Second, true},
		"http date":        {http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, 30 * time.Second, true},
		"ratelimit reset":  {http.Header{"Ratelimit-Reset": {"1795946412"}}, time.Unix(1795946412, 0).Sub(now), true},
		"retry-after wins": {http.Header{"Retry-After": {"2"}, "Ratelimit-Reset": {"1795946412"}}, 2 * time.Second, true},
		"none":             {http.Header{}, 0, false},
		"garbage":          {http.Header{"Retry-After": {"soon"}}, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := RetryAfter(tc.h, now)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestBackoffAndCheckRetry(t *testing.T) {
	t.Parallel()
	r429 := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"90"}}}
	require.Equal(t, 10*time.Second, Backoff(time.Second, 10*time.Second, 0, r429), "capped at max")
	d := Backoff(time.Second, time.Minute, 2, &http.Response{StatusCode: 502, Header: http.Header{}})
	require.GreaterOrEqual(t, d, 4*time.Second)
	require.LessOrEqual(t, d, 5*time.Second)

	ctx := context.Background()
	for code, want := range map[int]bool{408: true, 429: true, 500: true, 502: true, 501: false, 404: false, 422: false} {
		ok, err := CheckRetry(ctx, &http.Response{StatusCode: code}, nil)
		require.NoError(t, err)
		require.Equal(t, want, ok, "status %d", code)
	}
	// A 5xx may come after the forge acted: only a request a repeat cannot do twice is sent again.
	for _, tc := range []struct {
		method string
		ctx    context.Context
		code   int
		want   bool
	}{
		{http.MethodGet, ctx, 502, true},
		{http.MethodHead, ctx, 503, true},
		{http.MethodPut, ctx, 502, true},
		{http.MethodPatch, ctx, 500, true},
		{http.MethodDelete, ctx, 504, true},
		{http.MethodPost, ctx, 502, false},
		{http.MethodPost, ctx, 500, false},
		{http.MethodPut, ApplyOnce(ctx), 502, false},
		{http.MethodPost, ctx, 429, true},
		{http.MethodPost, ctx, 408, true},
		{http.MethodPut, ApplyOnce(ctx), 429, true},
	} {
		req, err := http.NewRequestWithContext(tc.ctx, tc.method, "http://forge.invalid/api", nil)
		require.NoError(t, err)
		ok, err := CheckRetry(tc.ctx, &http.Response{StatusCode: tc.code, Request: req}, nil)
		require.NoError(t, err)
		require.Equal(t, tc.want, ok, "%s %d (apply once: %v)", tc.method, tc.code, appliedOnce(tc.ctx))
	}
	ok, _ := CheckRetry(ctx, nil, &net.OpError{Op: "dial", Err: errors.New("refused")})
	require.True(t, ok, "never sent: safe to retry")
	ok, _ = CheckRetry(ctx, nil, &net.OpError{Op: "read", Err: errors.New("reset")})
	require.False(t, ok, "may have been applied")
}
