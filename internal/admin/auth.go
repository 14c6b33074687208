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
	return RequireTokenWith(token, NewAttempts(DefaultAttemptLimits()), h)
}

// RequireTokenWith is RequireToken counting the tries in tries, which other handlers may share
// (PageOptions.Attempts), so that a client has one budget whichever way it presents a token.
func RequireTokenWith(token string, tries *Attempts, h http.Handler) http.Handler {
	same := sameToken(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearerToken(r)
		right := false
		if ok {
			done, wait, allowed := tries.try(r)
			if !allowed {
				tooManyAttempts(w, wait)
				return
			}
			right = same(got)
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

// sameToken returns whether a received value is token: never for an empty one, in the same
// time whatever the value and its length (both sides hashed before the comparison).
func sameToken(token string) func(got string) bool {
	want := sha256.Sum256([]byte(token))
	return func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return token != "" && got != "" && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
}
