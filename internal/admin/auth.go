// Package admin holds what Alfred serves to its operators, apart from the webhook port:
// status endpoints, and the middleware that keeps them private.
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// RequireToken lets a request through to h only when it carries
// "Authorization: Bearer <token>" (the scheme in any case). Any other request is answered 401 with a
// WWW-Authenticate challenge and learns nothing else (not whether the path exists). The
// comparison takes the same time whatever the received value. An empty token refuses every
// request. Every admin endpoint (status, a web page, metrics) sits behind it. Tries of a token
// are limited per client address (DefaultAttemptLimits, the per-address part): past the budget
// a request with a token is answered 429 with Retry-After, unchecked; a right token uses none.
func RequireToken(token string, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	tries := newAttempts(DefaultAttemptLimits())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearerToken(r)
		right := false
		if ok {
			done, wait, allowed := tries.try(r)
			if !allowed {
				tooManyAttempts(w, wait)
				return
			}
			sum := sha256.Sum256([]byte(got))
			right = token != "" && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
			done(right)
		}
		if !right {
			w.Header().Set("WWW-Authenticate", `Bearer realm="alfred-admin"`)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("unauthorized\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
