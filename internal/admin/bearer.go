package admin

import (
	"net/http"
	"strings"
)

// bearerToken returns the credentials of "Authorization: Bearer <token>". The scheme is
// matched without regard to case ("bearer", "BEARER"): RFC 9110 §11.1 makes authentication
// schemes case-insensitive. The token is what follows the spaces after the scheme, unchanged
// (a trailing space is part of it, so it does not match).
func bearerToken(r *http.Request) (string, bool) {
	scheme, rest, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(rest, " "), true
}
