package forge

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
