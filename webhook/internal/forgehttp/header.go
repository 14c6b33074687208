package forgehttp

import (
	"net/http"
	"strings"
)

// FirstHeader returns the value, trimmed, of the first of names that h carries with a value that
// is not blank, or "" when none does. Forges send one fact under several names (X-Forgejo-* and
// X-Gitea-*, Idempotency-Key and X-Gitlab-Event-UUID), and the first name is preferred.
func FirstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(h.Get(n)); v != "" {
			return v
		}
	}
	return ""
}
