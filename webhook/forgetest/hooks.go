package forgetest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// AddHook configures a webhook on repo, as a maintainer would in the repository's settings.
// Its ID is assigned when 0. On the Forgejo stand-in ContentType is "json" or "form" and
// Events are Forgejo's hook event types; on the GitLab stand-in Events name the *_events
// flags without the suffix ("issues", "note", "merge_requests", "pipeline", …).
func (m *model) AddHook(repo string, h forge.Hook) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	if h.ID == 0 {
		h.ID = m.nextID()
	}
	h.Events = append([]string(nil), h.Events...)
	r.hooks = append(r.hooks, h)
	return h.ID
}

// botLevelLocked is the bot account's access level on p (the owner has 50).
func (m *model) botLevelLocked(p *modelRepo) int {
	if owner, _, _ := strings.Cut(p.path, "/"); strings.EqualFold(owner, BotLogin) {
		return 50
	}
	return p.access[strings.ToLower(BotLogin)]
}

// fjBotPermissions is the "permissions" object of a repository read by the bot's token; every
// account reads a public repository.
func (s *ForgejoServer) fjBotPermissions(p *modelRepo) map[string]bool {
	l := s.botLevelLocked(p)
	return map[string]bool{"admin": l >= 40, "push": l >= 30, "pull": true}
}

// fjHooks answers GET /repos/{o}/{r}/hooks like Forgejo: 403 for a non-admin, else the hooks
// in the API's shape (config.url, config.content_type, events, active).
func (s *ForgejoServer) fjHooks(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	if s.botLevelLocked(p) < 40 {
		s.fjError(w, http.StatusForbidden, "user should be an owner or a collaborator with admin write of a repository")
		return
	}
	out := []any{}
	for _, h := range p.hooks {
		out = append(out, map[string]any{
			"id": h.ID, "type": "gitea", "branch_filter": "*", "active": h.Active, "events": h.Events,
			"config":     map[string]string{"url": h.URL, "content_type": h.ContentType},
			"updated_at": fjTime(s.clock), "created_at": fjTime(s.clock), "authorization_header": "",
		})
	}
	fjPaginateAs(w, r, s.pageSize, out, totalOnly)
}

// glBotPermissions is the "permissions" object of a project read by the bot's token.
func (s *GitLabServer) glBotPermissions(p *modelRepo) map[string]any {
	l := s.botLevelLocked(p)
	var access any
	if l > 0 {
		access = map[string]any{"access_level": l, "notification_level": 3}
	}
	return map[string]any{"project_access": access, "group_access": nil}
}

// glHooks answers GET /projects/:id/hooks like GitLab: 403 below Maintainer, else the hooks
// with their *_events flags.
func (s *GitLabServer) glHooks(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	if s.botLevelLocked(p) < 40 {
		glMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	out := []any{}
	for _, h := range p.hooks {
		m := map[string]any{"id": h.ID, "url": h.URL, "project_id": p.id, "enable_ssl_verification": true,
			"alert_status": "executable", "created_at": s.clock.Format("2006-01-02T15:04:05Z07:00")}
		if !h.Active {
			m["alert_status"] = "permanently_disabled"
		}
		for _, f := range []string{"push", "tag_push", "issues", "confidential_issues", "note", "confidential_note",
			"merge_requests", "pipeline", "job", "wiki_page", "deployment", "releases", "emoji"} {
			m[f+"_events"] = false
		}
		for _, e := range h.Events {
			m[e+"_events"] = true
		}
		out = append(out, m)
	}
	glPaginate(w, r, s.pageSize, out)
}

// Hooks lists the seeded webhooks of repo, like the real forges only for an account with
// admin access (level 40 or more, or the owner): ErrForbidden otherwise. On a GitLab Fake the
// content type is "json", as GitLab sends nothing else.
func (f *Fake) Hooks(ctx context.Context, repo string) (out []forge.Hook, err error) {
	err = f.withRepo(ctx, "Hooks", repo, nil, func(r *modelRepo) error {
		if f.botLevelLocked(r) < 40 {
			return fmt.Errorf("fake forge: list hooks of %s: %w", repo, forge.ErrForbidden)
		}
		for _, h := range r.hooks {
			h.Events = slices.Clone(h.Events)
			if f.kind == forge.KindGitLab {
				h.ContentType = "json"
			}
			out = append(out, h)
		}
		return nil
	})
	return out, err
}
