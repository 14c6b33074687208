package forgejo

import (
	"context"

	"code.gitea.io/sdk/gitea"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Permission returns the token account's own access to repo, from the permissions of
// GET /repos/{owner}/{repo}. A repository the account cannot see wraps forge.ErrNotFound.
func (c *Client) Permission(ctx context.Context, repo string) (forge.Permission, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return forge.Permission{}, err
	}
	r, resp, err := c.api(ctx).GetRepo(owner, name)
	if err != nil {
		return forge.Permission{}, c.wrap("get repository "+repo, resp, err)
	}
	p := r.Permissions
	if p == nil {
		return forge.Permission{Role: "none"}, nil
	}
	out := forge.Permission{Read: p.Pull || p.Push || p.Admin, Write: p.Push || p.Admin, Admin: p.Admin}
	switch {
	case p.Admin:
		out.Role = "admin"
	case p.Push:
		out.Role = "write"
	case p.Pull:
		out.Role = "read"
	default:
		out.Role = "none"
	}
	return out, nil
}

// Hooks lists repo's webhooks (GET /repos/{owner}/{repo}/hooks, every page). Forgejo lets
// only repository admins list them, so a bot without admin gets an error wrapping
// forge.ErrForbidden (or forge.ErrNotFound, which Forgejo answers to some non-admins).
func (c *Client) Hooks(ctx context.Context, repo string) ([]forge.Hook, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	var out []forge.Hook
	for page := 1; ; page++ {
		hooks, resp, err := c.api(ctx).ListRepoHooks(owner, name, gitea.ListHooksOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}})
		if err != nil {
			return nil, c.wrap("list hooks of "+repo, resp, err)
		}
		for _, h := range hooks {
			out = append(out, forge.Hook{ID: h.ID, URL: h.Config["url"], ContentType: h.Config["content_type"],
				Events: h.Events, Active: h.Active})
		}
		if !morePages(respHeader(resp), page, len(hooks), len(out)) {
			return out, nil
		}
	}
}
