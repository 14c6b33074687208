package mailbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// closeMailbox removes what the mailbox holds on this host: containers, worktrees and the
// agent session state.
func (m *Machine) closeMailbox(ctx context.Context, mb *Mailbox) error {
	if err := m.jobs.Cleanup(ctx, mb.ID); err != nil {
		return err
	}
	return m.jobs.RemoveSessions(mb.ID)
}

// done closes the lifecycle on trigger (the issue closed, the merge request merged):
// status::done, the bot unassigns itself, everything is cleaned.
func (m *Machine) done(ctx context.Context, bot Bot, mb *Mailbox, on trigger, why string) (string, error) {
	if err := m.closeMailbox(ctx, mb); err != nil {
		return "", err
	}
	if err := m.follow(ctx, bot, mb, on); err != nil {
		return "", err
	}
	if containsFold(mb.Assignees, bot.Login) {
		if err := bot.Forge.SetAssignees(ctx, mb.Ref(), nil, []string{bot.Login}); err != nil {
			return "", fmt.Errorf("unassign the bot: %w", err)
		}
		mb.Assignees = slices.DeleteFunc(mb.Assignees, func(s string) bool { return strings.EqualFold(s, bot.Login) })
	}
	now := m.now()
	mb.ClosedAt, mb.WakeAt = &now, nil
	return "done: " + why, nil
}

// cancel stops whatever runs for the mailbox and closes it on trigger (unassigned, merge
// request closed, issue gone), leaving the labels as they are.
func (m *Machine) cancel(ctx context.Context, mb *Mailbox, on trigger, why string) (string, error) {
	to, err := next(mb.State, on)
	if err != nil {
		return "", err
	}
	if err := m.closeMailbox(ctx, mb); err != nil {
		return "", err
	}
	now := m.now()
	mb.State, mb.ClosedAt, mb.WakeAt = to, &now, nil
	return "cancelled: " + why, nil
}

// block parks the mailbox on trigger until a human says "retry", which resumes it in state
// from.
func (m *Machine) block(ctx context.Context, bot Bot, mb *Mailbox, on trigger, from State, reason string) error {
	to, err := next(mb.State, on)
	if err != nil {
		return err
	}
	mb.Data.Blocked, mb.Data.BlockedFrom = reason, from
	// Each block is a new comment: Failures and CIAttempts restart after a retry, so they
	// cannot tell a second block from the first.
	mb.Data.Blocks++
	body := fmt.Sprintf("I am blocked: %s\n\nComment `retry` when you want me to try again.", reason)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("blocked-%d-%s-b%d", mb.Data.Round, from, mb.Data.Blocks), "blocked", body); err != nil {
		return err
	}
	return m.setState(ctx, bot, mb, to)
}

// retry resumes a blocked mailbox in the state it was blocked from, when a writer asks.
func (m *Machine) retry(ctx context.Context, bot Bot, mb *Mailbox, author string, eventID int64) (string, error) {
	if ok, err := m.canWrite(ctx, bot, mb.Repo, author); err != nil {
		return "", err
	} else if !ok {
		return m.refuse(ctx, bot, mb, eventID, author, "ask me to retry")
	}
	from := cmp.Or(mb.Data.BlockedFrom, StateFunctionalAnalysis)
	mb.Data.Blocked, mb.Data.Failures = "", 0
	if from == StateCIFix {
		mb.Data.CIAttempts = 0
	}
	body := fmt.Sprintf("Retrying as asked by @%s.", author)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("retry-%d", eventID), "retry", body); err != nil {
		return "", err
	}
	return "retry", m.setState(ctx, bot, mb, from)
}
