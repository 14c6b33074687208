package mailbox

import "github.com/alfred-bot/alfred/runner/phase"

// Phase returns the phase the state runs (its row in the lifecycle table), "" for a state that
// runs none: what a mailbox in s is queued for.
func (s State) Phase() phase.Phase { return def(s).Phase }
