// Package httpserve builds Alfred's HTTP servers with their limits: header, body, write and
// idle timeouts, a header size cap, and a cap on the requests handled at once.
package httpserve

import (
	"net/http"
	"strconv"
	"time"
)

// Limits bounds what one client can hold. Every field is required (positive).
type Limits struct {
	// ReadHeaderTimeout bounds reading the request line and headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the whole request, body included; a client sending its body
	// slowly is cut off when it passes.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end of its answer.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request headers.
	MaxHeaderBytes int
	// MaxConcurrent is how many requests are handled (their bodies read, their events stored)
	// at once; the others wait for a slot, at most ReadTimeout, then get 503 with Retry-After.
	MaxConcurrent int
}

// New returns a server for h with the limits applied (Limit wraps h).
func New(l Limits, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           Limit(l.MaxConcurrent, l.ReadTimeout, h),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// Limit lets at most n requests into h at once. A request waits for a slot while its client
// is connected, at most wait; then it is answered 503 with "Retry-After: 1" (the server is
// saturated, nothing was read or stored). n < 1 means no limit.
func Limit(n int, wait time.Duration, h http.Handler) http.Handler {
	if n < 1 {
		return h
	}
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case slots <- struct{}{}:
			case <-r.Context().Done():
				return
			case <-t.C:
				w.Header().Set("Retry-After", strconv.Itoa(1))
				http.Error(w, "too many requests in progress", http.StatusServiceUnavailable)
				return
			}
		}
		defer func() { <-slots }()
		h.ServeHTTP(w, r)
	})
}
