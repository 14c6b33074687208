package mailbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
// changes, and the self-review (when one was asked for) is over without a blocking finding
// left (selfReviewSettled). The merge names that head, so a push after the checks is not merged unseen. A
// refusal by the forge (a 4xx: not mergeable, approvals missing by the forge's count, a
// conflict, a protected branch) is said once in the issue, by a comment keyed by the head, and
// the head is not tried again until something changes on the merge request (see
// Data.AutoMergeRefused): the mailbox stays in review. A merge done moves the mailbox to done;
// in shadow mode the merge is recorded instead, once per head (Data.ShadowMerged), and the
// mailbox stays in review.
// fired reports a state change.
func (m *Machine) autoMerge(ctx context.Context, bot Bot, mb *Mailbox, mr *forge.MergeRequest) (fired bool, err error) {
	if mb.State != StateInReview || mr.State != "open" || !m.autoMergeOn(mb) || mr.HeadSHA == "" ||
		mb.Data.AutoMergeRefused == mr.HeadSHA || mb.Data.ShadowMerged == mr.HeadSHA || !m.selfReviewSettled(mb) {
		return false, nil
	}
	mg, ok := bot.Forge.(forge.Merger)
	if !ok {
		return false, errors.New("the forge client has no merge calls")
	}
	p, err := bot.Forge.CIStatus(ctx, mb.Repo, mr.HeadSHA)
	if err != nil {
		return false, fmt.Errorf("read CI status: %w", err)
	}
	if p.State != forge.CISuccess {
		return false, nil
	}
	c, err := mg.MergeChecks(ctx, mb.Repo, mr.Number)
	if err != nil {
		return false, fmt.Errorf("read the approvals and threads: %w", err)
	}
	if !c.Approved || c.OpenThreads > 0 || len(c.ChangesRequested) > 0 {
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
	if len(c.ApprovedBy) > 0 {
		approvals = "it is approved by " + strings.Join(c.ApprovedBy, ", ")
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
	if ok, err := m.canWrite(ctx, bot, mb.Repo, sender); err != nil {
		return "", err
	} else if !ok {
		if err := bot.Forge.SetLabels(ctx, mb.Ref(), nil, []string{label}); err != nil {
			return "", fmt.Errorf("remove %s: %w", label, err)
		}
		mb.Labels = slices.DeleteFunc(mb.Labels, func(l string) bool { return strings.EqualFold(l, label) })
		return m.refuse(ctx, bot, mb, eventID, sender, "turn auto-merge on")
	}
	mb.Data.AutoMergeRefused, mb.Data.MergeCheckAt = "", time.Time{}
	body := fmt.Sprintf("Auto-merge is on, as @%s added `%s`: I will merge the %s (%s) once CI is green, the required approvals are there and no review thread is open.",
		sender, label, m.mrWord(bot), m.settings(mb.Repo).MergeMethod)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("auto-merge-on-%d", eventID), "auto_merge", body); err != nil {
		return "", err
	}
	return "auto-merge on", nil
}

// autoMergeRecheck has the merge status read at the next pass after an event on the bot's
// merge request (a review, an approval, a comment, new commits): what the forge refused may
// have changed.
func (m *Machine) autoMergeRecheck(mb *Mailbox) {
	if mb.State == StateInReview && m.autoMergeOn(mb) {
		mb.Data.AutoMergeRefused, mb.Data.MergeCheckAt = "", time.Time{}
	}
}
