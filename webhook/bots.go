package webhook

import "github.com/alfred-bot/alfred/webhook/forge"

// markBots sets User.Bot on every account of ev that is a bot: the forge says so (GitLab's bot
// field when sent) or forge.IsBotLogin.
// The mailbox never lets a bot start, answer, validate or retry anything, and never mentions
// one (spec/edge.md, "Bots").
func markBots(ev *forge.Event) {
	mark := func(u *forge.User) {
		if u.Login != "" && !u.Bot {
			u.Bot = forge.IsBotLogin(ev.Kind, u.ID, u.Login)
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
