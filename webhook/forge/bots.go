package forge

import (
	"regexp"
	"strings"
)

// gitlabBotLogin matches the accounts GitLab creates as bots: project and group access token
// users ("project_42_bot", "project_42_bot_0a1b…", "group_7_bot_…"), service accounts
// ("service_account_…") and the instance's internal bots (GitLab docs, "Project access
// tokens" → bot users; "Internal users"). GitLab's webhook payloads carry no bot flag.
var gitlabBotLogin = regexp.MustCompile(`^((project|group)_\d+_bot(_[0-9a-z]+)?|service_account_.+|(alert|support|security|automation|visual_review|suggested_reviewers|duo_code_review|llm)[-_]bot|ghost)$`)

// forgejoActionsUserID is the id Gitea and Forgejo give their built-in Actions user
// ("gitea-actions", "forgejo-actions"); -1 is the ghost of a deleted account.
const forgejoActionsUserID = -2

// IsBotLogin reports whether the account (login, and id when known, else 0) of a forge of kind
// is a bot by its name or id alone: a forge's built-in automation account (gitlabBotLogin, the
// Gitea/Forgejo Actions user) or a login that follows the bot naming convention, a "[bot]"
// suffix (Renovate, Dependabot) or a "-bot" / "_bot" suffix ("ci-bot", "renovate_bot").
func IsBotLogin(kind Kind, id int64, login string) bool {
	l := strings.ToLower(login)
	if strings.HasSuffix(l, "[bot]") || strings.HasSuffix(l, "-bot") || strings.HasSuffix(l, "_bot") {
		return true
	}
	switch kind {
	case KindGitLab:
		return gitlabBotLogin.MatchString(l)
	case KindForgejo:
		return id == forgejoActionsUserID || l == "gitea-actions" || l == "forgejo-actions"
	}
	return false
}
