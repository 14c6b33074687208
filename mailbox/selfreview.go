package mailbox

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// SelfReviewConfig configures the self_review phase: a read-only run that reads the bot's own
// merge request (its diff against the plan, the functional analysis and the repository's
// guidelines) after a push and before the issue goes to a human's review (spec/lifecycle.md,
// "Self-review").
type SelfReviewConfig struct {
	// Enabled turns the self-review on everywhere; Settings.SelfReview overrides it per
	// project or organization. Off by default.
	Enabled bool
	// MaxRounds bounds the review_fix rounds that address blocking findings, per merge
	// request (default 1). After a round with rounds left, the merge request is reviewed again.
	MaxRounds int
	// AfterFixes also reviews the merge request after each ci_fix and review_fix push (a
	// human's review comments fixed), not only after the development.
	AfterFixes bool
}

// selfReviewAttempts is how many self_review runs in a row may fail (an error, no result, an
// invalid one) before the issue goes on without the self-review, saying so in the merge
// request's description: the first failure is retried like any run.
const selfReviewAttempts = 2

// sectionSelfReview names the merge request description's section Alfred keeps up to date
// with the self-review's findings.
const sectionSelfReview = "self_review"

// SelfReview is what the self-review of a mailbox's merge request found and did, kept in
// Data.SelfReview.
type SelfReview struct {
	// Pending is true from the push that calls for a self-review until the self-review is
	// over (its run, and its review_fix round): auto-merge waits meanwhile.
	Pending bool `json:"pending,omitempty"`
	// Head is the commit the last self_review run read.
	Head string `json:"head,omitempty"`
	// Summary is the last run's summary.
	Summary string `json:"summary,omitempty"`
	// Rounds counts the review_fix rounds started for blocking findings; Fixing is true while
	// the review_fix due (or running) addresses them rather than a human's review comments.
	Rounds int  `json:"rounds,omitempty"`
	Fixing bool `json:"fixing,omitempty"`
	// Failures counts the self_review runs that failed in a row; Failed is why the last
	// self-review could not be done ("" when it was).
	Failures int    `json:"failures,omitempty"`
	Failed   string `json:"failed,omitempty"`
	// Findings are the findings of the last run, after those earlier rounds fixed.
	Findings []SelfFinding `json:"findings,omitempty"`
}

// SelfFinding is one finding of a self-review and what became of it.
type SelfFinding struct {
	phase.Finding
	// Outcome is what the review_fix round did about it (phase.OutcomeFixed, OutcomeAnswered,
	// OutcomeDeclined); "" when no round addressed it.
	Outcome string `json:"outcome,omitempty"`
	// Note is the round's reply (answered, fixed) or reason (declined); Commit the commit that
	// fixed it.
	Note   string `json:"note,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// open reports whether a human still has to look at f: no round fixed it.
func (f SelfFinding) open() bool { return f.Outcome != phase.OutcomeFixed }

// selfReviewOn reports whether the bot reviews its own merge requests in mb's project.
func (m *Machine) selfReviewOn(mb *Mailbox) bool {
	return !mb.MergeRequest && m.settings(mb.Repo).SelfReview
}

// afterPush moves a mailbox whose run (in state) just pushed to its merge request: to a
// self-review when one is due (after the development; after a ci_fix or a human's review_fix
// with self_review.after_fixes), else to CI.
func (m *Machine) afterPush(ctx context.Context, bot Bot, mb *Mailbox, state State) error {
	due := false
	if m.selfReviewOn(mb) && mb.MRNumber != 0 {
		switch state {
		case StateInDevelopment:
			due = true
		case StateCIFix, StateReviewFix:
			due = m.cfg.SelfReview.AfterFixes
		}
	}
	if !due {
		return m.follow(ctx, bot, mb, onPushed)
	}
	sr := mb.selfReview()
	sr.Pending, sr.Fixing = true, false
	if state == StateInDevelopment {
		// A new merge request (or the development done again): a fresh self-review.
		*sr = SelfReview{Pending: true}
	}
	return m.follow(ctx, bot, mb, onPushedSelfReview)
}

// selfReview returns the mailbox's self-review record, creating it.
func (mb *Mailbox) selfReview() *SelfReview {
	if mb.Data.SelfReview == nil {
		mb.Data.SelfReview = &SelfReview{}
	}
	return mb.Data.SelfReview
}

// selfReviewInput fills a self_review run: the bot's merge request, whose diff the runner adds.
func (m *Machine) selfReviewInput(bot Bot, mb *Mailbox, in *phase.Input, repo *forge.Repository) {
	in.Review = &phase.ReviewInput{MergeRequest: mb.MRNumber, Author: bot.Login, Title: mb.Title,
		Target: repo.DefaultBranch}
}

// applySelfReview acts on a self_review result: blocking findings go to a review_fix round while
// rounds are left (and review_fix is on); otherwise the findings are listed in the merge
// request's description and the merge request goes to CI, then to a human.
func (m *Machine) applySelfReview(ctx context.Context, bot Bot, mb *Mailbox, r *phase.Result) error {
	sr := mb.selfReview()
	sr.Head, sr.Summary, sr.Failures, sr.Failed = mb.HeadSHA, strings.TrimSpace(r.Summary), 0, ""
	kept := slices.DeleteFunc(slices.Clone(sr.Findings), SelfFinding.open) // fixed by an earlier round
	for _, f := range r.Findings {
		kept = append(kept, SelfFinding{Finding: f})
	}
	sr.Findings = kept
	blocking := 0
	for _, f := range sr.Findings {
		if f.open() && f.Blocking() {
			blocking++
		}
	}
	if blocking > 0 && sr.Rounds < m.cfg.SelfReview.MaxRounds && m.cfg.ReviewFixAttempts > 0 {
		sr.Rounds++
		sr.Fixing = true
		if err := m.writeSelfReview(ctx, bot, mb); err != nil {
			return err
		}
		return m.follow(ctx, bot, mb, onSelfReviewFindings)
	}
	sr.Pending = false
	if err := m.writeSelfReview(ctx, bot, mb); err != nil {
		return err
	}
	return m.follow(ctx, bot, mb, onSelfReviewClean)
}

// selfReviewFailed acts on a failed self_review run: the first failure runs it again (the
// mailbox stays in self_review); after selfReviewAttempts the merge request goes on to CI and
// review, with "self-review failed: …" in its description, never blocked by it.
func (m *Machine) selfReviewFailed(ctx context.Context, bot Bot, mb *Mailbox, reason string) error {
	sr := mb.selfReview()
	sr.Failures++
	if sr.Failures < selfReviewAttempts {
		m.log.Info("the self_review run failed; running it again", "mailbox_id", mb.ID, "reason", reason)
		return nil
	}
	sr.Failed, sr.Pending, sr.Fixing, sr.Failures = reason, false, false, 0
	if err := m.writeSelfReview(ctx, bot, mb); err != nil {
		return err
	}
	return m.follow(ctx, bot, mb, onSelfReviewFailed)
}

// selfReviewFixInput fills a review_fix run that addresses the self-review's open blocking
// findings: each is a comment whose id is its place in SelfReview.Findings plus one, at its
// file and line, by the bot.
func (m *Machine) selfReviewFixInput(bot Bot, mb *Mailbox, in *phase.Input, repo *forge.Repository) bool {
	sr := mb.Data.SelfReview
	var comments []phase.ThreadComment
	for i, f := range sr.Findings {
		if f.open() && f.Blocking() {
			comments = append(comments, phase.ThreadComment{ID: int64(i + 1), Author: bot.Login,
				ReviewState: "self_review", Path: f.Path, Line: f.Line, Body: f.Text})
		}
	}
	if len(comments) == 0 {
		return false
	}
	in.Review = &phase.ReviewInput{MergeRequest: mb.MRNumber, Author: bot.Login, Title: mb.Title,
		Target: repo.DefaultBranch, Comments: comments}
	return true
}

// applySelfReviewFix acts on a review_fix round for the self-review's findings: each outcome is
// recorded on its finding, the issue is told in a word, the description's section updated; the
// merge request is reviewed again while rounds are left, else it goes to CI.
func (m *Machine) applySelfReviewFix(ctx context.Context, bot Bot, mb *Mailbox, state State, out *phase.Outcome) error {
	r := out.Result
	if r.Fixed() && out.HeadSHA == "" {
		return m.block(ctx, bot, mb, onNothingPushed, state, "the review_fix run says it fixed a finding of the self-review but changed no file.")
	}
	sr := mb.Data.SelfReview
	fixed := 0
	for _, o := range r.Comments {
		i := int(o.ID) - 1
		if i < 0 || i >= len(sr.Findings) {
			continue
		}
		f := &sr.Findings[i]
		f.Outcome, f.Note = o.Outcome, strings.TrimSpace(o.Reply+" "+o.Reason)
		if o.Outcome == phase.OutcomeFixed {
			f.Commit = out.HeadSHA
			fixed++
		}
	}
	sr.Fixing = false
	msg := fmt.Sprintf("My self-review of %s found %d blocking finding(s): I fixed %d",
		m.mrRef(bot, mb.MRNumber), len(r.Comments), fixed)
	if out.HeadSHA != "" {
		msg += " in " + short(out.HeadSHA)
	}
	msg += fmt.Sprintf(" (round %d of %d). The %s's description lists what is left for a human.",
		sr.Rounds, m.cfg.SelfReview.MaxRounds, m.mrWord(bot))
	if err := m.post(ctx, bot, mb, fmt.Sprintf("self-review-fix-%d", sr.Rounds), "self_review", msg); err != nil {
		return err
	}
	on := onAnswered
	if out.HeadSHA != "" {
		mb.HeadSHA = out.HeadSHA
		mb.Data.CIWaitUntil = m.now().Add(m.cfg.CIWait)
		on = onPushed
		if sr.Rounds < m.cfg.SelfReview.MaxRounds {
			on = onPushedSelfReview // what the round left, read again
		}
	}
	sr.Pending = on == onPushedSelfReview
	if err := m.writeSelfReview(ctx, bot, mb); err != nil {
		return err
	}
	return m.follow(ctx, bot, mb, on)
}

// selfReviewSettled reports whether auto-merge may merge as far as the self-review is
// concerned: none was asked for (off, or the merge request predates it), or it is over with no
// blocking finding left unfixed and did not fail. A blocking finding left, or a self-review
// that could not run, leaves the merge to a human.
func (m *Machine) selfReviewSettled(mb *Mailbox) bool {
	sr := mb.Data.SelfReview
	if sr == nil {
		return true
	}
	if sr.Pending || sr.Fixing || sr.Failed != "" {
		return false
	}
	for _, f := range sr.Findings {
		if f.open() && f.Blocking() {
			return false
		}
	}
	return true
}

// writeSelfReview writes the self-review's section into the merge request's description,
// between its hidden markers, the rest of the description kept byte for byte.
func (m *Machine) writeSelfReview(ctx context.Context, bot Bot, mb *Mailbox) error {
	if mb.MRNumber == 0 || mb.Data.SelfReview == nil {
		return nil
	}
	mr, err := bot.Forge.MergeRequest(ctx, mb.Repo, mb.MRNumber)
	if err != nil {
		return fmt.Errorf("read the %s's description: %w", m.mrWord(bot), err)
	}
	content := m.cfg.Redact(renderSelfReview(mb.Data.SelfReview, m.cfg.SelfReview.MaxRounds))
	body := SetSection(mr.Body, sectionSelfReview, content)
	if body == mr.Body {
		return nil
	}
	if err := bot.Forge.SetIssueBody(ctx, mb.MRRef(), body); err != nil {
		return fmt.Errorf("write the self-review into the %s's description: %w", m.mrWord(bot), err)
	}
	return nil
}

// renderSelfReview renders the "Self-review" section of the merge request's description: what
// the bot checked, what is left for a human and what it fixed (golden-tested).
func renderSelfReview(sr *SelfReview, maxRounds int) string {
	var b strings.Builder
	b.WriteString("### Self-review\n\n")
	at := ""
	if sr.Head != "" {
		at = " at " + short(sr.Head)
	}
	var left, fixed []SelfFinding
	for _, f := range sr.Findings {
		if f.open() {
			left = append(left, f)
		} else {
			fixed = append(fixed, f)
		}
	}
	switch {
	case sr.Failed != "":
		fmt.Fprintf(&b, "**self-review failed:** %s\n\nI could not check this change myself before asking for a review: review it as usual.\n",
			oneLine(sr.Failed))
	case sr.Fixing:
		fmt.Fprintf(&b, "I read this change%s against its plan, the functional analysis and the repository's guidelines, and I am fixing its blocking findings (round %d of %d).\n",
			at, sr.Rounds, maxRounds)
	case len(sr.Findings) == 0 && sr.Head != "":
		fmt.Fprintf(&b, "I read this change%s against its plan, the functional analysis and the repository's guidelines and found nothing to report.\n", at)
	case sr.Head != "":
		fmt.Fprintf(&b, "I read this change%s against its plan, the functional analysis and the repository's guidelines before asking for a review", at)
		if sr.Rounds > 0 {
			fmt.Fprintf(&b, " (%d fix round(s) of %d)", sr.Rounds, maxRounds)
		}
		b.WriteString(".\n")
	default:
		b.WriteString("I am reading this change against its plan, the functional analysis and the repository's guidelines.\n")
	}
	if sr.Summary != "" && sr.Failed == "" {
		fmt.Fprintf(&b, "\n> %s\n", oneLine(sr.Summary))
	}
	if len(left) > 0 {
		title := "Left for you"
		if sr.Fixing {
			title = "Found" // the round under way decides what is left
		}
		fmt.Fprintf(&b, "\n**%s** (%d):\n\n", title, len(left))
		for _, f := range left {
			fmt.Fprintf(&b, "- **%s** %s: %s", f.Severity, findingPlace(f.Finding), oneLine(f.Text))
			switch f.Outcome {
			case phase.OutcomeDeclined:
				fmt.Fprintf(&b, " *(not fixed: %s)*", oneLine(f.Note))
			case phase.OutcomeAnswered:
				fmt.Fprintf(&b, " *(answered: %s)*", oneLine(f.Note))
			}
			b.WriteString("\n")
		}
	}
	if len(fixed) > 0 {
		fmt.Fprintf(&b, "\n**Fixed before your review** (%d):\n\n", len(fixed))
		for _, f := range fixed {
			fmt.Fprintf(&b, "- **%s** %s: %s", f.Severity, findingPlace(f.Finding), oneLine(f.Text))
			if f.Commit != "" {
				fmt.Fprintf(&b, " *(fixed in %s)*", short(f.Commit))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// findingPlace renders where a finding is: `path:line`, `path`, or the change as a whole.
func findingPlace(f phase.Finding) string {
	switch {
	case f.Path == "":
		return "(the change as a whole)"
	case f.Line > 0:
		return fmt.Sprintf("`%s:%d`", f.Path, f.Line)
	}
	return "`" + f.Path + "`"
}

// oneLine folds an agent's text onto one line of a Markdown list, without anything that could
// open an HTML comment (and with it end Alfred's section early).
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "<!--", "&lt;!--")
}
