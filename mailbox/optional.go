package mailbox

import "github.com/alfred-bot/alfred/webhook/forge"

// withOptional returns f with the review calls rv and the merge calls mg, each where it is not
// nil. A wrapper of a forge client (GuardPosts, the effects count) builds its result with it,
// so the result has each optional interface (forge.Reviews, forge.Merger) exactly when the
// client has it, whatever the others.
func withOptional(f forge.Forge, rv forge.Reviews, mg forge.Merger) forge.Forge {
	switch {
	case rv != nil && mg != nil:
		return struct {
			forge.Forge
			forge.Reviews
			forge.Merger
		}{f, rv, mg}
	case rv != nil:
		return struct {
			forge.Forge
			forge.Reviews
		}{f, rv}
	case mg != nil:
		return struct {
			forge.Forge
			forge.Merger
		}{f, mg}
	}
	return f
}
