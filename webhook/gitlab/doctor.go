package gitlab

import (
	"context"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Permission returns the token account's own access to repo, from permissions.project_access
// and permissions.group_access of GET /projects/:id (the higher of the two). A project the
// account cannot see wraps forge.ErrNotFound.
func (c *Client) Permission(ctx context.Context, repo string) (forge.Permission, error) {
	p, resp, err := c.api.Projects.GetProject(repo, nil, gl.WithContext(ctx))
	if err != nil {
		return forge.Permission{}, c.wrap("get project "+repo, resp, err)
	}
	var level gl.AccessLevelValue
	if p.Permissions != nil {
		if a := p.Permissions.ProjectAccess; a != nil {
			level = max(level, a.AccessLevel)
		}
		if a := p.Permissions.GroupAccess; a != nil {
			level = max(level, a.AccessLevel)
		}
	}
	out := forge.Permission{Read: level >= gl.ReporterPermissions, Write: level >= gl.DeveloperPermissions,
		Admin: level >= gl.MaintainerPermissions, Role: accessRole(level)}
	return out, nil
}

func accessRole(l gl.AccessLevelValue) string {
	switch {
	case l >= gl.OwnerPermissions:
		return "Owner"
	case l >= gl.MaintainerPermissions:
		return "Maintainer"
	case l >= gl.DeveloperPermissions:
		return "Developer"
	case l >= gl.ReporterPermissions:
		return "Reporter"
	case l >= gl.GuestPermissions:
		return "Guest"
	}
	return "none"
}

// Hooks lists the project's webhooks (GET /projects/:id/hooks, every page; Maintainer role
// needed, else an error wrapping forge.ErrForbidden). Events are the *_events flags that are
// on, named without the suffix; ContentType is "json" (GitLab sends nothing else).
func (c *Client) Hooks(ctx context.Context, repo string) ([]forge.Hook, error) {
	var out []forge.Hook
	opt := &gl.ListProjectHooksOptions{ListOptions: gl.ListOptions{PerPage: 100, Page: 1}}
	for {
		hooks, resp, err := c.api.Projects.ListProjectHooks(repo, opt, gl.WithContext(ctx))
		if err != nil {
			return nil, c.wrap("list hooks of "+repo, resp, err)
		}
		for _, h := range hooks {
			out = append(out, forge.Hook{ID: h.ID, URL: h.URL, ContentType: "json", Events: hookEvents(h),
				Active: !strings.HasSuffix(h.AlertStatus, "disabled")})
		}
		if resp == nil || resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

func hookEvents(h *gl.ProjectHook) []string {
	var ev []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{h.IssuesEvents, "issues"}, {h.ConfidentialIssuesEvents, "confidential_issues"},
		{h.NoteEvents, "note"}, {h.ConfidentialNoteEvents, "confidential_note"},
		{h.MergeRequestsEvents, "merge_requests"}, {h.PipelineEvents, "pipeline"}, {h.JobEvents, "job"},
		{h.PushEvents, "push"}, {h.TagPushEvents, "tag_push"}, {h.EmojiEvents, "emoji"},
	} {
		if f.on {
			ev = append(ev, f.name)
		}
	}
	return ev
}
