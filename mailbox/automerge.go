package mailbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// autoMergeOn reports whether auto-merge is on for the mailbox: the AutoMerge label on the
// issue, or the project's (or organization's, or the global) auto_merge setting.
func (m *Machine) autoMergeOn(mb *Mailbox) bool {
	return containsFold(mb.Labels, m.cfg.Labels.AutoMerge) || m.settings(mb.Repo).AutoMerge
}

// autoMerge merges the bot's merge request mr (just read) through the forge's merge API when
// auto-merge is on, the mailbox is in review, CI is green on mr's head, the forge's required
// approvals are present and no review thread is open nor a reviewer's latest verdict asks for
// changes, no writer's review comment waits for its review_fix (Data.ReviewDue), and the
// self-review (when one was asked for) is over without a blocking finding left
// (selfReviewSettled). The merge names that head, so a push after the checks is not merged unseen. A
// refusal by the forge (a 4xx: not mergeable, approvals missing by the forge's count, a
// conflict, a protected branch) is said once in the issue, by a comment keyed by the head, and
// the head is not tried again until something changes on the merge request (see
// Data.AutoMergeRefused): the mailbox stays in review. A merge done moves the mailbox to done;
// in shadow mode the merge is recorded instead, once per head (Data.ShadowMerged), and the
// mailbox stays in review.
// fired reports a state change.
func (m *Machine) autoMerge(ctx context.Context, bot Bot, mb *Mailbox, mr *forge.MergeRequest) (fired bool, err error) {
	if mb.Data.ShadowMerged != "" && !m.settings(mb.Repo).Shadow {
		mb.Data.ShadowMerged = "" // live now: the merge shadow mode only recorded is to be made
	}
	if mb.State != StateInReview || mr.State != "open" || !m.autoMergeOn(mb) || mr.HeadSHA == "" ||
		mb.Data.AutoMergeRefused == mr.HeadSHA || mb.Data.ShadowMerged == mr.HeadSHA || !m.selfReviewSettled(mb) {
		return false, nil
	}
	mg, ok := bot.Forge.(forge.Merger)
	if !ok {
		return false, errors.New("the forge client has no merge calls")
	}
	waits, c, err := m.mergeGate(ctx, bot, mb, mg, mr)
	if err != nil {
		return false, err
	}
	if waits != mb.Data.AutoMergeWaits {
		mb.Data.AutoMergeWaits = waits
		m.log.Info("auto-merge waits", "mailbox_id", mb.ID, "head", mr.HeadSHA, "waits", waits)
		m.postProgress(ctx, bot, mb, "", time.Time{})
	}
	if waits != "" {
		return false, nil
	}
	method := m.settings(mb.Repo).MergeMethod
	sha7 := short(mr.HeadSHA)
	err = mg.Merge(ctx, mb.Repo, mr.Number, forge.MergeOptions{Method: method, HeadSHA: mr.HeadSHA})
	if err == nil && m.settings(mb.Repo).Shadow {
		// Recorded, not merged (the Shadow wrapper): the merge and what follows it happen on
		// the forge, so the issue stays in review, as for a run that pushes.
		mb.Data.ShadowMerged = mr.HeadSHA
		return false, nil
	}
	if refusedByForge(err) {
		mb.Data.AutoMergeRefused = mr.HeadSHA
		body := fmt.Sprintf("CI is green on %s, the %s has the approvals the forge requires and no review thread is open, but the forge refused to merge it (%s): %s\n\nI leave it in review. Merge it yourself, or fix what the forge says: I try again after the next change to the %s, or when `%s` is added again.",
			sha7, m.mrWord(bot), method, m.cfg.Redact(err.Error()), m.mrWord(bot), m.cfg.Labels.AutoMerge)
		return false, m.post(ctx, bot, mb, "auto-merge-refused-"+mr.HeadSHA, "auto_merge", body)
	}
	if err != nil {
		return false, fmt.Errorf("merge: %w", err)
	}
	approvals := "it has the approvals the forge requires"
	if by := approversOf(c, mr.HeadSHA, bot.Login); len(by) > 0 {
		approvals = "it is approved by " + strings.Join(by, ", ")
	}
	body := fmt.Sprintf("I merged %s (%s): CI is green on %s, %s and no review thread is open.",
		m.mrRef(bot, mr.Number), method, sha7, approvals)
	if err := m.post(ctx, bot, mb, "auto-merged-"+mr.HeadSHA, "auto_merge", body); err != nil {
		return false, err
	}
	_, err = m.done(ctx, bot, mb, onAutoMerged, "merged by Alfred (auto-merge)")
	return err == nil, err
}

// autoMergeLabel handles the AutoMerge label added by a human: a writer's turns auto-merge on
// (said once) and has the merge status read at once; anyone else's is removed with the reason.
func (m *Machine) autoMergeLabel(ctx context.Context, bot Bot, mb *Mailbox, sender string, eventID int64) (string, error) {
	label := m.cfg.Labels.AutoMerge
	// The label passed the gate already (gateLabels): sender may steer.
	mb.Data.AutoMergeBy = sender
	mb.Data.AutoMergeRefused, mb.Data.MergeCheckAt, mb.Data.AutoMergeWaits = "", time.Time{}, ""
	body := fmt.Sprintf("Auto-merge is on, as @%s added `%s`: I will merge the %s (%s) once CI is green, the required approvals are there and no review thread is open.",
		sender, label, m.mrWord(bot), m.settings(mb.Repo).MergeMethod)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("auto-merge-on-%d", eventID), "auto_merge", body); err != nil {
		return "", err
	}
	return "auto-merge on", nil
}

// forgetAutoMergeBy forgets who turned auto-merge on once the label is off the issue: the
// label added again is someone else's act, checked again (autoMergeEnabler, the merge gate).
func (m *Machine) forgetAutoMergeBy(mb *Mailbox) {
	if !containsFold(mb.Labels, m.cfg.Labels.AutoMerge) {
		mb.Data.AutoMergeBy = ""
	}
}

// autoMergeRecheck has the merge status read at the next pass after an event on the bot's
// merge request (a review, an approval, a comment, new commits): what the forge refused may
// have changed.
func (m *Machine) autoMergeRecheck(mb *Mailbox) {
	if mb.State == StateInReview && m.autoMergeOn(mb) {
		mb.Data.AutoMergeRefused, mb.Data.MergeCheckAt = "", time.Time{}
	}
}

// mergeGate returns what auto-merge still waits for before it merges head H of mr ("" for
// nothing), with the forge's checks: auto-merge enabled by configuration, or by a writer who
// still may steer now; CI green on H; at least MinApprovals approvals given on H by accounts
// other than the bot with the role gate.Approval needs (approvals of earlier heads never
// count, whatever the forge's own setting on stale approvals); the approvals the forge itself
// requires; no review thread open, no reviewer's latest verdict asking for changes, and no
// writer's review comment waiting for its review_fix (Data.ReviewDue).
func (m *Machine) mergeGate(ctx context.Context, bot Bot, mb *Mailbox, mg forge.Merger, mr *forge.MergeRequest) (string, *forge.MergeChecks, error) {
	sha7 := short(mr.HeadSHA)
	if !mb.Data.ReviewDue.IsZero() {
		// A writer's review comments wait for their review_fix (the quiet time runs): what
		// they ask is worked first.
		return "the review_fix of the review comments left meanwhile", nil, nil
	}
	if !m.settings(mb.Repo).AutoMerge {
		by, err := m.autoMergeEnabler(ctx, bot, mb)
		if err != nil {
			return "", nil, err
		}
		if by == "" {
			return fmt.Sprintf("a member with write access to add `%s` (the label history shows none)", m.cfg.Labels.AutoMerge), nil, nil
		}
		ok, err := m.canWrite(ctx, bot, mb.Repo, by)
		if containsFold(mb.Data.IgnoredLabels, m.cfg.Labels.AutoMerge) {
			ok = false // another bot added it (Data.IgnoredLabels): nobody's, whatever its access
		}
		switch {
		case err != nil:
			return "", nil, err
		case ok && mb.Data.AutoMergeBy == "":
			mb.Data.AutoMergeBy = by // the history named a writer: recorded, checked again each time
		case !ok && mb.Data.AutoMergeBy == "":
			// Added by a non-writer while Alfred did not see it (before the assignment, a
			// missed delivery): undone as gateLabels undoes it.
			if m.cfg.Refused != nil {
				m.cfg.Refused(string(gate.SteerLabel), gate.Reason(m.cfg.Needs, gate.SteerLabel))
			}
			if err := bot.Forge.SetLabels(ctx, mb.Ref(), nil, []string{m.cfg.Labels.AutoMerge}); err != nil {
				return "", nil, fmt.Errorf("remove %s: %w", m.cfg.Labels.AutoMerge, err)
			}
			mb.Labels = slices.DeleteFunc(mb.Labels, func(l string) bool { return strings.EqualFold(l, m.cfg.Labels.AutoMerge) })
			mb.Data.IgnoredLabels = slices.DeleteFunc(mb.Data.IgnoredLabels, func(l string) bool { return strings.EqualFold(l, m.cfg.Labels.AutoMerge) })
			if _, err := m.refuseAs(ctx, bot, mb, "refused-labels-"+strings.ToLower(by), by, "turn auto-merge on"); err != nil {
				return "", nil, err
			}
			return fmt.Sprintf("a member with write access to add `%s`: @%s, who added it, has no write access", m.cfg.Labels.AutoMerge, by), nil, nil
		case !ok:
			waits := fmt.Sprintf("a member with write access to add `%s` again: @%s, who added it, no longer has write access", m.cfg.Labels.AutoMerge, by)
			if m.cfg.Refused != nil && waits != mb.Data.AutoMergeWaits { // counted once, not per poll
				m.cfg.Refused(string(gate.SteerLabel), "enabler_lost_write")
			}
			return waits, nil, nil
		}
	}
	p, err := bot.Forge.CIStatus(ctx, mb.Repo, mr.HeadSHA)
	if err != nil {
		return "", nil, fmt.Errorf("read CI status: %w", err)
	}
	if p.State != forge.CISuccess {
		return "CI to be green on " + sha7, nil, nil
	}
	c, err := mg.MergeChecks(ctx, mb.Repo, mr.Number)
	if err != nil {
		return "", nil, fmt.Errorf("read the approvals and threads: %w", err)
	}
	if c.OpenThreads > 0 {
		return fmt.Sprintf("%d open review thread(s) to be resolved", c.OpenThreads), c, nil
	}
	if len(c.ChangesRequested) > 0 {
		return "a new verdict of " + strings.Join(c.ChangesRequested, ", ") + ", who asked for changes", c, nil
	}
	n := 0
	for _, login := range approversOf(c, mr.HeadSHA, bot.Login) {
		r, err := m.role(ctx, bot, mb.Repo, login)
		if err != nil {
			return "", nil, err
		}
		if r >= m.cfg.Needs.Need(gate.Approval) {
			n++
		}
	}
	if need := *m.cfg.MinApprovals; n < need {
		return fmt.Sprintf("an approval of %s by a member with write access (%d of %d)", sha7, n, need), c, nil
	}
	if !c.Approved {
		return fmt.Sprintf("the approvals the forge requires (%d)", c.ApprovalsRequired), c, nil
	}
	return "", c, nil
}

// approversOf lists the accounts, other than the bot, whose approval c reports on head.
func approversOf(c *forge.MergeChecks, head, botLogin string) []string {
	var out []string
	for _, a := range c.Approvals {
		if a.SHA == head && !strings.EqualFold(a.Login, botLogin) && !containsFold(out, a.Login) {
			out = append(out, a.Login)
		}
	}
	return out
}
