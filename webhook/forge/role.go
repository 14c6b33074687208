package forge

import (
	"fmt"
	"strings"
)

// Role is a person's standing in a repository, as the forge reports it, ordered: each role may
// do what the roles below it may. Alfred's authorization gate (mailbox/gate) compares it with
// the role an input needs (spec/authorization.md).
//
// Forgejo/Gitea: GET /repos/{owner}/{repo}/collaborators/{user}/permission answers
// {"permission": "none"|"read"|"write"|"admin"|"owner", "role_name": …}; a "read" member of a
// team whose units give write on issues ("repo.issues": "write", GET /repos/{o}/{r}/teams and
// GET /teams/{id}/members/{user}) is RoleTriage. GitLab: GET /projects/:id/members/all/:user_id
// access_level: 10 Guest RoleRead, 20 Reporter RoleTriage, 30 Developer RoleWrite, 40
// Maintainer and 50 Owner RoleAdmin; 404 (not a member) RoleNone.
type Role int

// The roles, lowest first.
const (
	// RoleNone: no membership (GitLab non-member; Forgejo "none", a private repository).
	RoleNone Role = iota
	// RoleRead: may read and comment (Forgejo "read", GitLab Guest).
	RoleRead
	// RoleTriage: may label and assign issues but not push (a Forgejo/Gitea team with write on
	// issues only, GitLab Reporter).
	RoleTriage
	// RoleWrite: may push and merge (Forgejo "write", GitLab Developer).
	RoleWrite
	// RoleAdmin: administers the repository (Forgejo "admin" or "owner", GitLab Maintainer or
	// Owner).
	RoleAdmin
)

var roleNames = [...]string{"none", "read", "triage", "write", "admin"}

// String returns the role's configuration name: none, read, triage, write or admin.
func (r Role) String() string {
	if r < 0 || int(r) >= len(roleNames) {
		return fmt.Sprintf("role(%d)", int(r))
	}
	return roleNames[r]
}

// ParseRole reads a role's configuration name (case-insensitive); an error names the valid
// ones.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Role(i), nil
		}
	}
	return RoleNone, fmt.Errorf("forge: unknown role %q (none, read, triage, write or admin)", s)
}

// GitLabRole maps a GitLab access level (10 Guest, 20 Reporter, 30 Developer, 40 Maintainer,
// 50 Owner; 0 or less: not a member) to a Role.
func GitLabRole(level int) Role {
	switch {
	case level >= 40:
		return RoleAdmin
	case level >= 30:
		return RoleWrite
	case level >= 20:
		return RoleTriage
	case level >= 10:
		return RoleRead
	}
	return RoleNone
}

// ForgejoRole maps a Forgejo/Gitea permission ("none", "read", "write", "admin", "owner") to a
// Role; triage says the account is in a team with write on issues (only read otherwise).
func ForgejoRole(permission string, triage bool) Role {
	switch strings.ToLower(permission) {
	case "owner", "admin":
		return RoleAdmin
	case "write":
		return RoleWrite
	case "read":
		if triage {
			return RoleTriage
		}
		return RoleRead
	}
	return RoleNone
}
