package forge

import (
	"net/url"
	"strings"
)

// Hook is a webhook configured on a repository (Forgejo: GET /repos/{o}/{r}/hooks; GitLab:
// GET /projects/:id/hooks), as the doctor compares it with what Alfred needs.
type Hook struct {
	// ID is the forge's id of the hook.
	ID int64
	// URL is where the forge delivers (Forgejo: config.url; GitLab: url).
	URL string
	// ContentType is "json" or "form" on Forgejo; always "json" on GitLab.
	ContentType string
	// Events are the events the hook sends, in the forge's own names: Forgejo's hook event
	// types ("issues", "issue_assign", "pull_request_sync", "status", …); on GitLab the
	// *_events flags that are on, without the suffix ("issues", "note", "merge_requests",
	// "pipeline", "job", "push", …).
	Events []string
	// Active is false for a hook the forge does not deliver to.
	Active bool
}

// Permission is the token account's own access to a repository (Forgejo: the permissions of
// GET /repos/{o}/{r}; GitLab: permissions.project_access / group_access of GET /projects/:id).
type Permission struct {
	// Read, Write and Admin say what the account may do: Write is push and merge requests
	// (Forgejo write, GitLab Developer or more); Admin is repository administration
	// (Forgejo admin or owner, GitLab Maintainer or more).
	Read, Write, Admin bool
	// Role is the forge's own word for it ("admin", "write", "Developer", …).
	Role string
}

// SameHookURL reports whether a webhook's URL is want, the URL Alfred's webhooks must call
// (what reconciliation and the doctor both go by): the same scheme and host (case
// insensitive), port (the scheme's default when absent) and path, a trailing '/' ignored; the
// query (GitLab lets one add it) is ignored too. A URL that does not parse is not the same.
func SameHookURL(hook, want string) bool {
	h, err1 := url.Parse(strings.TrimSpace(hook))
	w, err2 := url.Parse(want)
	if err1 != nil || err2 != nil || h.Host == "" {
		return false
	}
	return strings.EqualFold(h.Scheme, w.Scheme) && strings.EqualFold(h.Hostname(), w.Hostname()) &&
		urlPort(h) == urlPort(w) && strings.TrimRight(h.Path, "/") == strings.TrimRight(w.Path, "/")
}

// urlPort is u's port, the scheme's default (80, 443) when it names none.
func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}
