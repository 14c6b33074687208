package gitlab

import (
	"context"
	"net/http"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// BotUser returns the token's account (GET /user). The first success is cached.
func (c *Client) BotUser(ctx context.Context) (forge.User, error) {
	return c.bot.Get(ctx, func(ctx context.Context) (forge.User, error) {
		u, resp, err := c.api.Users.CurrentUser(gl.WithContext(ctx))
		if err != nil {
			return forge.User{}, c.wrap("get current user", resp, err)
		}
		return forge.User{ID: u.ID, Login: u.Username, Bot: u.Bot}, nil
	})
}

// userID resolves a username with GET /users?username=; ok is false when no account has it.
func (c *Client) userID(ctx context.Context, login string) (id int64, ok bool, err error) {
	users, resp, err := c.api.Users.ListUsers(&gl.ListUsersOptions{Username: gl.Ptr(login)}, gl.WithContext(ctx))
	if err != nil {
		return 0, false, c.wrap("find user "+login, resp, err)
	}
	for _, u := range users {
		if strings.EqualFold(u.Username, login) {
			return u.ID, true, nil
		}
	}
	return 0, false, nil
}

// Role returns login's role in the project: the access level of its membership, direct or
// through its groups (GET /projects/:id/members/all/:user_id, access_level), mapped by
// forge.GitLabRole (10 Guest read, 20 Reporter triage, 30 Developer write, 40 Maintainer and 50
// Owner admin). An unknown login or a non-member (404) is RoleNone with a nil error.
func (c *Client) Role(ctx context.Context, repo, login string) (forge.Role, error) {
	id, ok, err := c.userID(ctx, login)
	if err != nil || !ok {
		return forge.RoleNone, err
	}
	m, resp, err := c.api.ProjectMembers.GetInheritedProjectMember(repo, id, gl.WithContext(ctx))
	if err != nil {
		if clientStatus(resp, err) == http.StatusNotFound {
			if _, err := c.Repository(ctx, repo); err != nil {
				return forge.RoleNone, err
			}
			return forge.RoleNone, nil
		}
		return forge.RoleNone, c.wrap("get member "+login+" of "+repo, resp, err)
	}
	return forge.GitLabRole(int(m.AccessLevel)), nil
}

// Repository returns the project's path, default branch and http_url_to_repo.
func (c *Client) Repository(ctx context.Context, repo string) (*forge.Repository, error) {
	p, resp, err := c.api.Projects.GetProject(repo, nil, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("get project "+repo, resp, err)
	}
	return &forge.Repository{Path: p.PathWithNamespace, DefaultBranch: p.DefaultBranch, CloneURL: p.HTTPURLToRepo}, nil
}
