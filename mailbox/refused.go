package mailbox

import (
	"context"
	"errors"
	"fmt"
)

// postRefused handles a post the forge refused with a 4xx (ErrPostRefused): sending it again
// cannot succeed, so instead of failing the pass (which the workers retry) the mailbox blocks
// with the forge's reason, said in a comment when the forge takes that one, and the pending
// events are recorded as not applied. In blocked, or outside a working state, the refusal is
// only recorded. A writer's `retry` resumes as after any block.
func (m *Machine) postRefused(ctx context.Context, bot Bot, mb *Mailbox, cause error) error {
	reason := m.cfg.Redact(cause.Error())
	m.log.Warn("the forge refused a post; blocking", "mailbox_id", mb.ID, "err", reason)
	if mb.State.Working() && mb.State != StateBlocked {
		from := mb.State
		err := m.block(ctx, bot, mb, onPostRefused, from, "the forge refused what I tried to post: "+reason)
		if errors.Is(err, ErrPostRefused) { // the notice too: block without it
			to, nerr := next(from, onPostRefused)
			if nerr != nil {
				return nerr
			}
			err = m.setState(ctx, bot, mb, to)
		}
		if err != nil {
			return fmt.Errorf("block after a refused post: %w", err)
		}
	}
	mb.WakeAt = nil
	if err := m.store.Save(ctx, mb); err != nil {
		return err
	}
	return m.drain(ctx, mb, "not applied: the forge refused a post: "+reason)
}
