package mailbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/mailbox/gate"
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

// retry resumes a blocked mailbox in the state it was blocked from, when a writer asks, with
// fresh attempts for that phase.
func (m *Machine) retry(ctx context.Context, bot Bot, mb *Mailbox, author string, eventID int64) (string, error) {
	if d, err := m.authorize(ctx, bot, mb, gate.Command, author); err != nil {
		return "", err
	} else if d != gate.Allowed {
		// One refusal per person and block: sixteen "retry" comments are answered once.
		key := fmt.Sprintf("refused-retry-b%d-%s", mb.Data.Blocks, strings.ToLower(author))
		return m.refuseAs(ctx, bot, mb, key, author, "ask me to retry")
	}
	return m.resume(ctx, bot, mb, author, eventID, true, fmt.Sprintf("Retrying as asked by @%s.", author))
}

// resume moves a blocked mailbox back to the state it was blocked from when author, a
// writer, asks (a retry comment or label, or the blocked label removed: the caller passed it
// through the gate), saying so in body.
// reset gives the phase fresh attempts (retry); without it the attempts used stay counted, so
// that ai::retry_once is exactly one more attempt.
func (m *Machine) resume(ctx context.Context, bot Bot, mb *Mailbox, author string, eventID int64, reset bool, body string) (string, error) {
	from := cmp.Or(mb.Data.BlockedFrom, StateFunctionalAnalysis)
	mb.Data.Blocked, mb.Data.Failures = "", 0
	if reset {
		switch from {
		case StateCIFix:
			mb.Data.CIAttempts = 0
		case StateReviewFix:
			mb.Data.ReviewAttempts = 0
		}
	}
	if err := m.post(ctx, bot, mb, fmt.Sprintf("retry-%d", eventID), "retry", body); err != nil {
		return "", err
	}
	return "resumed in " + string(from), m.setState(ctx, bot, mb, from)
}

// retryLabel handles a retry label added by a human: ai::retry and ai::retry_once are
// removed at once and resume a blocked mailbox (with fresh attempts, or with one more);
// ai::retry_until_green stays until CI is green or the ceiling is reached, and lets ci_fix and
// review_fix go past their bounds meanwhile.
func (m *Machine) retryLabel(ctx context.Context, bot Bot, mb *Mailbox, label, sender string, eventID int64) (string, error) {
	l := m.cfg.Labels
	untilGreen := strings.EqualFold(label, l.RetryUntilGreen)
	if !untilGreen {
		if err := bot.Forge.SetLabels(ctx, mb.Ref(), nil, []string{label}); err != nil {
			return "", fmt.Errorf("remove %s: %w", label, err)
		}
		mb.Labels = slices.DeleteFunc(mb.Labels, func(s string) bool { return strings.EqualFold(s, label) })
	}
	// The label passed the gate already (gateLabels).
	if untilGreen {
		mb.Data.UntilGreen, mb.Data.UntilGreenRuns = true, 0
	}
	if mb.State != StateBlocked {
		if untilGreen {
			return "retry until green: on", nil
		}
		return "ignored: nothing is blocked", nil
	}
	var body string
	switch {
	case untilGreen:
		body = fmt.Sprintf("Retrying until CI is green (at most %d runs), as asked by @%s.", m.cfg.RetryUntilGreenMax, sender)
	case strings.EqualFold(label, l.RetryOnce):
		body = fmt.Sprintf("Trying once more, as asked by @%s.", sender)
	default:
		body = fmt.Sprintf("Retrying as asked by @%s.", sender)
	}
	return m.resume(ctx, bot, mb, sender, eventID, strings.EqualFold(label, l.Retry), body)
}

// untilGreenCeiling ends ai::retry_until_green at its ceiling: it removes the label, says so
// and blocks (from).
func (m *Machine) untilGreenCeiling(ctx context.Context, bot Bot, mb *Mailbox, from State) error {
	if err := m.dropUntilGreen(ctx, bot, mb, fmt.Sprintf(
		"I ran %d fixes under `%s` and CI is still not green: I removed the label.", mb.Data.UntilGreenRuns, m.cfg.Labels.RetryUntilGreen)); err != nil {
		return err
	}
	on := onCIExhausted
	if from == StateReviewFix {
		on = onReviewSpent
	}
	return m.block(ctx, bot, mb, on, from, fmt.Sprintf("the ceiling of %d runs under %s is reached.", m.cfg.RetryUntilGreenMax, m.cfg.Labels.RetryUntilGreen))
}

// dropUntilGreen removes ai::retry_until_green from the issue and says why (msg).
func (m *Machine) dropUntilGreen(ctx context.Context, bot Bot, mb *Mailbox, msg string) error {
	mb.Data.UntilGreen = false
	if err := bot.Forge.SetLabels(ctx, mb.Ref(), nil, []string{m.cfg.Labels.RetryUntilGreen}); err != nil {
		return fmt.Errorf("remove %s: %w", m.cfg.Labels.RetryUntilGreen, err)
	}
	mb.Labels = slices.DeleteFunc(mb.Labels, func(s string) bool { return strings.EqualFold(s, m.cfg.Labels.RetryUntilGreen) })
	return m.post(ctx, bot, mb, fmt.Sprintf("until-green-%d-%d", mb.Data.Blocks, mb.Data.UntilGreenRuns), "until_green", msg)
}
