package webhook

import (
	"regexp"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// gitlabBotLogin matches the accounts GitLab creates as bots: project and group access token
// users ("project_42_bot", "project_42_bot_0a1b…", "group_7_bot_…"), service accounts
// ("service_account_…") and the instance's internal bots (GitLab docs, "Project access
// tokens" → bot users; "Internal users"). GitLab's webhook payloads carry no bot flag.
var gitlabBotLogin = regexp.MustCompile(`^((project|group)_\d+_bot(_[0-9a-z]+)?|service_account_.+|(alert|support|security|automation|visual_review|suggested_reviewers|duo_code_review|llm)[-_]bot|ghost)$`)

// forgejoActionsUserID is the id Gitea and Forgejo give their built-in Actions user
// ("gitea-actions", "forgejo-actions"); -1 is the ghost of a deleted account.
const forgejoActionsUserID = -2

// markBots sets User.Bot on every account of ev that is a bot: the forge says so (GitLab's bot
// field when sent), it is a forge's built-in automation account (gitlabBotLogin, the Forgejo
// Actions user), or its login follows the bot naming convention: a "[bot]" suffix (GitHub
// Apps mirrored, Renovate, Dependabot) or a "-bot" / "_bot" suffix ("ci-bot", "renovate_bot").
// The mailbox never lets a bot start, answer, validate or retry anything, and never mentions
// one (spec/edge.md, "Bots").
func markBots(ev *forge.Event) {
	mark := func(u *forge.User) {
		if u.Login != "" && !u.Bot {
			u.Bot = IsBotLogin(ev.Kind, u.ID, u.Login)
		}
	}
	mark(&ev.Sender)
	mark(&ev.Author)
	if ev.Comment != nil {
		mark(&ev.Comment.Author)
	}
	if ev.MergeRequest != nil {
		mark(&ev.MergeRequest.Author)
	}
}

// IsBotLogin reports whether the account (login, and id when known) of a forge of kind is a
// bot by its name or id alone; see markBots.
func IsBotLogin(kind forge.Kind, id int64, login string) bool {
	l := strings.ToLower(login)
	if strings.HasSuffix(l, "[bot]") || strings.HasSuffix(l, "-bot") || strings.HasSuffix(l, "_bot") {
		return true
	}
	switch kind {
	case forge.KindGitLab:
		return gitlabBotLogin.MatchString(l)
	case forge.KindForgejo:
		return id == forgejoActionsUserID || l == "gitea-actions" || l == "forgejo-actions"
	}
	return false
}
