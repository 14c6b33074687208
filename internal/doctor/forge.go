package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Events a repository's webhook must send, in each forge's own names (forge.Hook.Events):
// what webhook/forgejo and webhook/gitlab parse into events the mailboxes act on.
var (
	// ForgejoEvents are Forgejo's and Gitea's hook event types.
	ForgejoEvents = []string{"issues", "issue_assign", "issue_label", "issue_comment", "pull_request",
		"pull_request_sync", "pull_request_comment", "pull_request_review_approved", "pull_request_review_rejected"}
	// GitLabEvents are GitLab's *_events flags, without the suffix.
	GitLabEvents = []string{"issues", "note", "merge_requests", "pipeline"}
)

// checkForge checks the token, then each repository: the bot's permission and the webhook.
func checkForge(ctx context.Context, r *Report, publicURL string, f Forge) {
	name := "forge " + f.Name
	u, err := bounded(ctx, r.quick, f.Client.BotUser)
	switch {
	case errors.Is(err, forge.ErrForbidden):
		r.add(name+": token", Fail, "the forge rejects the token", tokenFix(f))
		return
	case err != nil:
		r.add(name+": token", Fail, "cannot reach the forge: "+err.Error(),
			"check base_url and that this host reaches the forge")
		return
	case !strings.EqualFold(u.Login, f.BotUser):
		r.add(name+": token", Fail, fmt.Sprintf("the token belongs to %q, not to bot_user %q", u.Login, f.BotUser),
			fmt.Sprintf("use a token of %s, or set bot_user: %s", f.BotUser, u.Login))
		return
	}
	r.add(name+": token", OK, "belongs to "+u.Login, "")
	checkTransport(ctx, r, f)
	if len(f.Repos) == 0 {
		r.add(name+": repositories", Skip, "none with a mailbox or listed in repositories", "")
	}
	for _, repo := range f.Repos {
		if checkPermission(ctx, r, f, repo) && !f.NoWebhook {
			checkHook(ctx, r, publicURL, f, repo)
		}
	}
}

func tokenFix(f Forge) string {
	if f.Kind == forge.KindGitLab {
		return "create a personal access token of " + f.BotUser + " with the api scope and put it in token_file"
	}
	return "create an access token of " + f.BotUser + " (Settings → Applications, scopes repository and issue read/write) and put it in token_file"
}

// checkPermission reports the bot's access to repo; false when it is not enough (the hook
// check is then skipped: listing hooks needs at least that access).
func checkPermission(ctx context.Context, r *Report, f Forge, repo string) bool {
	check := fmt.Sprintf("forge %s: %s: permission", f.Name, repo)
	p, err := bounded(ctx, r.quick, func(ctx context.Context) (forge.Permission, error) { return f.Client.Permission(ctx, repo) })
	switch {
	case errors.Is(err, forge.ErrNotFound):
		r.add(check, Fail, f.BotUser+" cannot see the repository", "add "+f.BotUser+" to "+repo+" ("+wantRole(f.Kind)+")")
		return false
	case err != nil:
		r.add(check, Fail, err.Error(), "check the forge")
		return false
	}
	fix := "give " + f.BotUser + " the " + wantRole(f.Kind) + " role on " + repo
	switch {
	case !p.Write:
		r.add(check, Fail, f.BotUser+" has "+p.Role+": it cannot push or open a merge request", fix)
		return false
	case f.Kind == forge.KindForgejo && !p.Admin:
		// Forgejo shows a collaborator's permission only to admins, and Alfred checks that
		// whoever assigns it may write.
		r.add(check, Fail, f.BotUser+" has "+p.Role+": Forgejo shows other users' permissions and the webhooks only to admins", fix)
		return false
	}
	r.add(check, OK, f.BotUser+" has "+p.Role, "")
	return true
}

func wantRole(k forge.Kind) string {
	if k == forge.KindGitLab {
		return "Developer (Maintainer to let the doctor see the webhooks)"
	}
	return "admin"
}

func checkHook(ctx context.Context, r *Report, publicURL string, f Forge, repo string) {
	check := fmt.Sprintf("forge %s: %s: webhook", f.Name, repo)
	want := WebhookURL(cmpOr(publicURL, "<public_url>"), f.Name)
	events := ForgejoEvents
	if f.Kind == forge.KindGitLab {
		events = GitLabEvents
	}
	create := hookFix(f, repo, want, events)
	hooks, err := bounded(ctx, r.quick, func(ctx context.Context) ([]forge.Hook, error) { return f.Client.Hooks(ctx, repo) })
	switch {
	case errors.Is(err, forge.ErrForbidden) && f.Kind == forge.KindGitLab:
		r.add(check, Warn, f.BotUser+" may not list the project's webhooks (Maintainer needed): not verified",
			"check it by hand, or give "+f.BotUser+" Maintainer:\n"+create)
		return
	case err != nil:
		r.add(check, Fail, "cannot list the webhooks: "+err.Error(), create)
		return
	}
	var h *forge.Hook
	for i := range hooks {
		if hookPoints(hooks[i].URL, publicURL, want, f.Name) {
			h = &hooks[i]
			break
		}
	}
	if h == nil {
		found := "no webhook"
		if len(hooks) > 0 {
			var urls []string
			for _, x := range hooks {
				urls = append(urls, x.URL)
			}
			found = "no webhook to " + want + " (found: " + strings.Join(urls, ", ") + ")"
		}
		r.add(check, Fail, found, create)
		return
	}
	var problems []string
	if !h.Active {
		problems = append(problems, "it is not active")
	}
	if h.ContentType != "json" {
		problems = append(problems, "content type is "+cmpOr(h.ContentType, "unset")+", not application/json")
	}
	if missing := missingEvents(h.Events, events); len(missing) > 0 {
		problems = append(problems, "it does not send "+strings.Join(missing, ", "))
	}
	if len(problems) > 0 {
		r.add(check, Fail, fmt.Sprintf("hook %d to %s: %s", h.ID, h.URL, strings.Join(problems, "; ")),
			fmt.Sprintf("edit hook %d on %s: active, content type application/json, events %s", h.ID, repo, strings.Join(events, ", ")))
		return
	}
	detail := fmt.Sprintf("hook %d to %s with the events Alfred needs", h.ID, h.URL)
	if f.Kind == forge.KindForgejo && !slices.Contains(h.Events, "status") {
		r.add(check, OK, detail+" (no status event: CI is polled every ci_poll)", "")
		return
	}
	r.add(check, OK, detail, "")
}

// hookPoints reports whether a hook's URL is Alfred's: want (forge.SameHookURL) when the
// public URL is known, else any URL whose path ends in /webhooks/{name}.
func hookPoints(url, publicURL, want, name string) bool {
	if publicURL != "" {
		return forge.SameHookURL(url, want)
	}
	return strings.HasSuffix(strings.TrimRight(url, "/"), "/webhooks/"+name)
}

// eventGroups are hook event names that stand for others: Gitea 1.25 lists the review events
// as one "pull_request_review" (models/webhook: HookEventPullRequestReview).
var eventGroups = map[string]string{
	"pull_request_review_approved": "pull_request_review",
	"pull_request_review_rejected": "pull_request_review",
	"pull_request_review_comment":  "pull_request_review",
}

func missingEvents(have, want []string) []string {
	var out []string
	for _, e := range want {
		if !slices.Contains(have, e) && (eventGroups[e] == "" || !slices.Contains(have, eventGroups[e])) {
			out = append(out, e)
		}
	}
	return out
}

func hookFix(f Forge, repo, url string, events []string) string {
	if f.Kind == forge.KindGitLab {
		return fmt.Sprintf("on %s: Settings → Webhooks → Add: URL %s, the secret token of webhook_secret_file, triggers: issues, comments, merge requests, pipelines", repo, url)
	}
	return fmt.Sprintf("on %s: Settings → Webhooks → Add webhook (Gitea/Forgejo): URL %s, content type application/json, the secret of webhook_secret_file, custom events: %s (Gitea: also Status)", repo, url, strings.Join(events, ", "))
}

// checkTransport, for a polled forge, names its transport and makes one poll of the last
// minute: the bot's notifications (Forgejo/Gitea) or to-do list (GitLab) must answer with its
// token (spec/transport.md).
func checkTransport(ctx context.Context, r *Report, f Forge) {
	name := "forge " + f.Name + ": transport"
	what := "webhook"
	switch {
	case f.Poll && f.NoWebhook:
		what = "poll"
	case f.Poll:
		what = "webhook + poll"
	}
	if !f.Poll {
		return // the webhook checks of each repository below say it
	}
	p, ok := f.Client.(forge.Poller)
	if !ok {
		r.add(name, Fail, what+": the forge client cannot poll", "")
		return
	}
	if _, err := bounded(ctx, r.quick, func(ctx context.Context) ([]forge.Change, error) {
		return p.Changes(ctx, time.Now().Add(-time.Minute))
	}); err != nil {
		fix := "check that the token may read the bot's notifications (Forgejo/Gitea scope notification:read) or to-do list (GitLab api or read_api scope)"
		r.add(name, Fail, what+": the poll fails: "+err.Error(), fix)
		return
	}
	r.add(name, OK, what+": the bot's notifications answer", "")
}
