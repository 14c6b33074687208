// Package admin holds what Alfred serves to its operators, apart from the webhook port:
// status endpoints, and the middleware that keeps them private.
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// RequireToken lets a request through to h only when it carries
// "Authorization: Bearer <token>". Any other request is answered 401 with a
// WWW-Authenticate challenge and learns nothing else (not whether the path exists). The
// comparison takes the same time whatever the received value. An empty token refuses every
// request. Every admin endpoint (status, a web page, metrics) sits behind it.
func RequireToken(token string, h http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || token == "" || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="alfred-admin"`)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("unauthorized\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
