package forgejo

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// BotUser returns the token's account (GET /api/v1/user). The first success is cached.
func (c *Client) BotUser(ctx context.Context) (forge.User, error) {
	return c.bot.Get(ctx, func(context.Context) (forge.User, error) {
		u, resp, err := c.api(ctx).GetMyUserInfo()
		if err != nil {
			return forge.User{}, c.wrap("get current user", resp, err)
		}
		return forge.User{ID: u.ID, Login: u.UserName}, nil
	})
}

// Role returns login's role in the repository: the repository owner is RoleAdmin; otherwise
// GET /repos/{owner}/{repo}/collaborators/{login}/permission (its "permission", which counts
// collaborators, teams and site admins) mapped by forge.ForgejoRole, and for "read" the
// repository's teams (GET /repos/{owner}/{repo}/teams, units_map "repo.issues": "write" or
// more) whose membership GET /teams/{id}/members/{login} confirms make it RoleTriage. An
// unknown login is RoleNone with a nil error.
func (c *Client) Role(ctx context.Context, repo, login string) (forge.Role, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return forge.RoleNone, err
	}
	if strings.EqualFold(owner, login) {
		return forge.RoleAdmin, nil
	}
	api := c.api(ctx)
	p, resp, err := api.CollaboratorPermission(owner, name, login)
	if err != nil {
		if clientStatus(resp) == http.StatusNotFound {
			if _, err := c.Repository(ctx, repo); err != nil {
				return forge.RoleNone, err
			}
			return forge.RoleNone, nil
		}
		return forge.RoleNone, c.wrap("get permission of "+login+" on "+repo, resp, err)
	}
	if p == nil {
		return forge.RoleNone, nil
	}
	role := forge.ForgejoRole(string(p.Permission), false)
	if role != forge.RoleRead {
		return role, nil
	}
	teams, resp, err := api.GetRepoTeams(owner, name)
	if err != nil {
		if clientStatus(resp) == http.StatusNotFound { // a user's repository has no teams
			return role, nil
		}
		return forge.RoleNone, c.wrap("list the teams of "+repo, resp, err)
	}
	for _, t := range teams {
		if t == nil || !issuesWrite(t.UnitsMap) {
			continue
		}
		_, resp, err := api.GetTeamMember(t.ID, login)
		switch {
		case err == nil:
			return forge.RoleTriage, nil
		case clientStatus(resp) == http.StatusNotFound:
			continue
		default:
			return forge.RoleNone, c.wrap(fmt.Sprintf("read the members of team %d", t.ID), resp, err)
		}
	}
	return role, nil
}

// issuesWrite reports whether a team's units give write (or admin) on the issues.
func issuesWrite(units map[string]string) bool {
	switch strings.ToLower(units["repo.issues"]) {
	case "write", "admin", "owner":
		return true
	}
	return false
}

// Repository returns the repository's full name, default branch and clone_url.
func (c *Client) Repository(ctx context.Context, repo string) (*forge.Repository, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	r, resp, err := c.api(ctx).GetRepo(owner, name)
	if err != nil {
		return nil, c.wrap("get repository "+repo, resp, err)
	}
	return &forge.Repository{Path: r.FullName, DefaultBranch: r.DefaultBranch, CloneURL: r.CloneURL}, nil
}
