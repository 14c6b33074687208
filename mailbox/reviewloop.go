package mailbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// mergeCheckPause is how long the merge status is not read after a conflict_resolution found
// nothing to merge.
const mergeCheckPause = 10 * time.Minute

// reviews returns the forge's review calls; both forge clients and the Fake have them.
func reviews(bot Bot) (forge.Reviews, error) {
	rv, ok := bot.Forge.(forge.Reviews)
	if !ok {
		return nil, errors.New("the forge client has no review calls")
	}
	return rv, nil
}

// reviewEvent handles a review or a comment on the bot's merge request by someone else: one
// that asks for changes (reviewTrigger) by a writer starts (or extends) the quiet time after
// which a review_fix run takes every comment not answered yet; others are refused visibly.
// In a state that does not take review comments (a run in progress, blocked) the time is
// kept, and fires once the merge request is back in CI or review.
func (m *Machine) reviewEvent(ctx context.Context, bot Bot, mb *Mailbox, se StoredEvent) (string, error) {
	ev := se.Event
	if !reviewTrigger(ev, bot.Login) {
		return "review recorded", nil
	}
	if m.cfg.ReviewFixAttempts == 0 {
		return "ignored: review_fix is off", nil
	}
	if d, err := m.authorize(ctx, bot, mb, gate.Review, ev.Sender.Login); err != nil {
		return "", err
	} else if d != gate.Allowed {
		// One refusal per person and merge request: sixteen review comments are answered once.
		key := fmt.Sprintf("refused-review-%d-%s", mb.MRNumber, strings.ToLower(ev.Sender.Login))
		return m.refuseAs(ctx, bot, mb, key, ev.Sender.Login, "ask me to change the "+m.mrWord(bot))
	}
	mb.Data.ReviewDue = m.now().Add(m.cfg.ReviewQuiet)
	return "review comments gathered", nil
}

// reviewTimers fires, in in_ci and in_review, a review_fix once the quiet time is over, and
// reads the merge status every ci_poll: a conflict with the target (said twice in a row on
// Forgejo, whose mergeable is also false while it checks) starts a conflict_resolution.
func (m *Machine) reviewTimers(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	now := m.now()
	if !mb.Data.ReviewDue.IsZero() && !now.Before(mb.Data.ReviewDue) {
		mb.Data.ReviewDue = time.Time{}
		return true, m.startReviewFix(ctx, bot, mb)
	}
	if mb.MRNumber == 0 || now.Before(mb.Data.MergeCheckAt) || now.Before(mb.Data.MergeCheckAfter) {
		return false, nil
	}
	mb.Data.MergeCheckAt = now.Add(m.cfg.CIPoll)
	mr, err := bot.Forge.MergeRequest(ctx, mb.Repo, mb.MRNumber)
	if err != nil {
		return false, fmt.Errorf("read the merge status: %w", err)
	}
	if mr.MergeStatus != forge.MergeStatusConflict {
		mb.Data.ConflictReads = 0
		return m.autoMerge(ctx, bot, mb, mr)
	}
	mb.Data.ConflictReads++
	if need := m.conflictReads(bot); mb.Data.ConflictReads < need {
		return false, nil
	}
	mb.Data.ConflictReads = 0
	body := fmt.Sprintf("The %s conflicts with `%s`: I am merging `%s` into `%s`.",
		m.mrWord(bot), mr.TargetBranch, mr.TargetBranch, mb.Branch)
	if err := m.post(ctx, bot, mb, "conflict-"+mr.HeadSHA, "conflict", body); err != nil {
		return false, err
	}
	return true, m.follow(ctx, bot, mb, onConflict)
}

// conflictReads is how many reads in a row must say conflict: Forgejo/Gitea's mergeable is
// false while the check runs too.
func (m *Machine) conflictReads(bot Bot) int {
	if bot.Forge.Kind() == forge.KindForgejo {
		return 2
	}
	return 1
}

// mergeStatusEvent handles a merge status the forge reported (GitLab detailed_merge_status):
// a conflict is confirmed through the API at once.
func (m *Machine) mergeStatusEvent(mb *Mailbox, ev forge.Event) string {
	if ev.MergeRequest == nil || ev.MergeRequest.MergeStatus != forge.MergeStatusConflict {
		return "merge status recorded"
	}
	mb.Data.MergeCheckAt = time.Time{}
	return "merge status: conflict, to be confirmed"
}

// startReviewFix moves to review_fix while attempts are left (the ceiling of
// ai::retry_until_green under that label), else blocks. The attempt is counted when the run
// finds comments to address (reviewFixInput).
func (m *Machine) startReviewFix(ctx context.Context, bot Bot, mb *Mailbox) error {
	if mb.Data.UntilGreen {
		if mb.Data.UntilGreenRuns >= m.cfg.RetryUntilGreenMax {
			return m.untilGreenCeiling(ctx, bot, mb, StateReviewFix)
		}
	} else if mb.Data.ReviewAttempts >= m.cfg.ReviewFixAttempts {
		return m.block(ctx, bot, mb, onReviewSpent, StateReviewFix,
			fmt.Sprintf("the review asks for changes again, and review_fix ran %d times on this %s (review_fix_attempts).",
				mb.Data.ReviewAttempts, m.mrWord(bot)))
	}
	return m.follow(ctx, bot, mb, onReviewDue)
}

// reviewFixInput gathers the comments a review_fix run addresses (pendingComments over the
// merge request's review threads and conversation, by writers only) into in. It reports false
// when there is none left: the run is not needed. count says whether the run counts against
// the review_fix bounds (false for the input of a run that already ran, its outcome stored).
func (m *Machine) reviewFixInput(ctx context.Context, bot Bot, mb *Mailbox, in *phase.Input, repo *forge.Repository, count bool) (bool, error) {
	if sr := mb.Data.SelfReview; sr != nil && sr.Fixing {
		if m.selfReviewFixInput(bot, mb, in, repo) {
			return true, nil
		}
		sr.Fixing, sr.Pending = false, false // nothing left to fix
		return false, m.writeSelfReview(ctx, bot, mb)
	}
	rv, err := reviews(bot)
	if err != nil {
		return false, err
	}
	thread, err := rv.ReviewComments(ctx, mb.Repo, mb.MRNumber)
	if err != nil {
		return false, fmt.Errorf("read the review comments: %w", err)
	}
	conv, err := bot.Forge.Comments(ctx, mb.MRRef())
	if err != nil {
		return false, fmt.Errorf("read the %s's comments: %w", m.mrWord(bot), err)
	}
	handled := map[int64]bool{}
	for _, id := range mb.Data.Handled {
		handled[id] = true
	}
	var take []forge.ReviewComment
	for _, c := range pendingComments(thread, conv, bot.Login, time.Time{}, handled) {
		if ok, err := m.hasRole(ctx, bot, mb.Repo, c.Author.Login, gate.Review); err != nil {
			return false, err
		} else if !ok || otherBot(bot.Forge.Kind(), c.Author, bot) {
			mb.Data.Handled = append(mb.Data.Handled, c.ID) // refused when it arrived
			continue
		}
		take = append(take, c)
	}
	mb.Data.ReviewComments = take
	if len(take) == 0 {
		return false, nil
	}
	// Only a run that has comments to address counts against the bounds, once: not again when
	// its stored outcome is acted on (count false).
	if count {
		mb.Data.ReviewAttempts++
		if mb.Data.UntilGreen {
			mb.Data.UntilGreenRuns++
		}
	}
	in.Review = &phase.ReviewInput{MergeRequest: mb.MRNumber, Author: bot.Login, Title: mb.Title,
		Target: repo.DefaultBranch, Comments: threadComments(take)}
	return true, nil
}

// applyReviewFix answers every comment of the run (runID) in its thread (once: each reply
// carries a marker keyed by the comment and the run, so acting on the same stored outcome again
// after a failed pass posts no reply twice), resolves the GitLab threads it fixed, says what it
// did in the issue and moves on to CI. A result that says a comment is fixed but pushed nothing
// blocks.
func (m *Machine) applyReviewFix(ctx context.Context, bot Bot, mb *Mailbox, state State, out *phase.Outcome, runID int64) error {
	if sr := mb.Data.SelfReview; sr != nil && sr.Fixing {
		return m.applySelfReviewFix(ctx, bot, mb, state, out)
	}
	r := out.Result
	if r.Fixed() && out.HeadSHA == "" {
		return m.block(ctx, bot, mb, onNothingPushed, state, "the review_fix run says it fixed a comment but changed no file.")
	}
	rv, err := reviews(bot)
	if err != nil {
		return err
	}
	posted, err := m.postedReplies(ctx, bot, rv, mb)
	if err != nil {
		return err
	}
	count := map[string]int{}
	for _, o := range r.Comments {
		i := slices.IndexFunc(mb.Data.ReviewComments, func(c forge.ReviewComment) bool { return c.ID == o.ID })
		if i < 0 {
			continue
		}
		c := mb.Data.ReviewComments[i]
		count[o.Outcome]++
		key := fmt.Sprintf("reply-%d-run%d", c.ID, runID)
		if !posted[key] {
			body := Marker(key, "reply") + "\n" + m.cfg.Redact(replyBody(o, out.HeadSHA))
			if _, err := rv.Reply(ctx, mb.Repo, mb.MRNumber, c, body); errors.Is(err, forge.ErrNotFound) {
				// Its author deleted the comment (or its thread) while the run worked: there is
				// nothing to answer; the merge request itself is read again by the next step.
				m.log.Info("review comment gone before its reply; nothing to answer", "mailbox_id", mb.ID, "comment", c.ID)
				mb.Data.Handled = append(mb.Data.Handled, c.ID)
				continue
			} else if err != nil {
				return fmt.Errorf("reply to comment %d: %w", c.ID, err)
			}
		}
		if o.Outcome == phase.OutcomeFixed && c.Thread != "" && bot.Forge.Kind() == forge.KindGitLab {
			if err := rv.ResolveThread(ctx, mb.Repo, mb.MRNumber, c.Thread); err != nil && !errors.Is(err, forge.ErrNotFound) {
				return fmt.Errorf("resolve discussion %s: %w", c.Thread, err)
			}
		}
		mb.Data.Handled = append(mb.Data.Handled, c.ID)
	}
	mb.Data.ReviewComments = nil
	msg := fmt.Sprintf("I went through the review of %s: %d fixed, %d answered, %d declined.",
		m.mrRef(bot, mb.MRNumber), count[phase.OutcomeFixed], count[phase.OutcomeAnswered], count[phase.OutcomeDeclined])
	if out.HeadSHA != "" {
		msg += fmt.Sprintf(" The fixes are in %s.", short(out.HeadSHA))
	}
	if err := m.post(ctx, bot, mb, fmt.Sprintf("review-fix-%d", mb.Data.ReviewAttempts), "review_fix", msg); err != nil {
		return err
	}
	if out.HeadSHA == "" {
		return m.follow(ctx, bot, mb, onAnswered)
	}
	m.setHead(mb, out.HeadSHA)
	mb.Data.CIWaitUntil = m.now().Add(m.cfg.CIWait)
	return m.afterPush(ctx, bot, mb, state)
}

// postedReplies returns the keys of the replies the bot already posted on the merge request.
func (m *Machine) postedReplies(ctx context.Context, bot Bot, rv forge.Reviews, mb *Mailbox) (map[string]bool, error) {
	return m.postedKeys(ctx, bot, rv, mb.MRRef())
}

// postedKeys returns the marker keys of the bot's comments on the merge request mr: in its
// review threads and in its conversation.
func (m *Machine) postedKeys(ctx context.Context, bot Bot, rv forge.Reviews, mr forge.IssueRef) (map[string]bool, error) {
	out := map[string]bool{}
	thread, err := rv.ReviewComments(ctx, mr.Repo, mr.Number)
	if err != nil {
		return nil, fmt.Errorf("read the review comments: %w", err)
	}
	conv, err := bot.Forge.Comments(ctx, mr)
	if err != nil {
		return nil, fmt.Errorf("read the %s's comments: %w", m.mrWord(bot), err)
	}
	bodies := make([]string, 0, len(thread)+len(conv))
	for _, c := range thread {
		if strings.EqualFold(c.Author.Login, bot.Login) {
			bodies = append(bodies, c.Body)
		}
	}
	for _, c := range conv {
		if strings.EqualFold(c.Author.Login, bot.Login) {
			bodies = append(bodies, c.Body)
		}
	}
	for _, b := range bodies {
		if k, _, ok := ParseMarker(b); ok {
			out[k] = true
		}
	}
	return out, nil
}

// applyMerge acts on a conflict_resolution: the merge commit pushed (by git alone or after the
// agent's resolution) goes to CI; a branch that already held the target goes back to CI too.
func (m *Machine) applyMerge(ctx context.Context, bot Bot, mb *Mailbox, out *phase.Outcome) error {
	if out.HeadSHA == "" {
		mb.Data.MergeCheckAfter = m.now().Add(mergeCheckPause)
		return m.follow(ctx, bot, mb, onMergeUpToDate)
	}
	mb.Data.MergeCheckAfter = time.Time{}
	m.setHead(mb, out.HeadSHA)
	msg := fmt.Sprintf("I merged the target branch into `%s` as %s: %s", mb.Branch, short(out.HeadSHA),
		strings.TrimSpace(out.Result.Summary))
	if err := m.post(ctx, bot, mb, "merge-"+out.HeadSHA, "merge", msg); err != nil {
		return err
	}
	mb.Data.CIWaitUntil = m.now().Add(m.cfg.CIWait)
	return m.follow(ctx, bot, mb, onPushed)
}

// foreignMR handles an event on a merge request that is not the bot's: a writer asking the bot
// to review it starts a review run; anything else is recorded. The request is an event's
// ReviewRequested naming the bot: a review_requested event, or a merge request opened with the
// bot among its reviewers, or a change of its labels or assignees that also added the bot as
// a reviewer (GitLab sends one delivery for all of it).
func (m *Machine) foreignMR(ctx context.Context, bot Bot, mb *Mailbox, se StoredEvent, o origin) (string, error) {
	ev := se.Event
	asked := ev.Type == forge.EventReviewRequested || ev.Type == forge.EventMergeRequestOpened ||
		ev.Type == forge.EventLabels || ev.Type == forge.EventAssignees
	switch {
	case !asked || !containsFold(ev.ReviewRequested, bot.Login):
		return "recorded: merge requests that are not Alfred's are only reviewed when asked", nil
	case o.fromBot || o.otherBot:
		return "ignored: review asked by a bot", nil
	case mb.State == StateReviewing:
		return "review already due", nil
	}
	// Asking for a review starts work as an assignment does: the gate judges it as gate.Assign
	// (logged and counted when not allowed), and the refusal is said once per person and
	// merge request however often they ask.
	if d, err := m.authorize(ctx, bot, mb, gate.Assign, ev.Sender.Login); err != nil {
		return "", err
	} else if d != gate.Allowed {
		if d == gate.Ignored {
			return "ignored: review asked by @" + ev.Sender.Login + ", who has no write access", nil
		}
		return m.refuseAs(ctx, bot, mb, "refused-assign-"+strings.ToLower(ev.Sender.Login), ev.Sender.Login, "ask me for a review")
	}
	mb.Data.Blocked = ""
	if mb.State == StateIdle {
		return "review asked by @" + ev.Sender.Login, m.follow(ctx, bot, mb, onReviewAsked)
	}
	return "review asked again by @" + ev.Sender.Login, m.setState(ctx, bot, mb, StateReviewing)
}

// reviewInput fills a review run of a merge request that is not the bot's: the merge request,
// and the head of the bot's previous review so that only what changed since is reviewed. The
// mailbox's branch is the merge request's source branch: it names the run's session.
func (m *Machine) reviewInput(ctx context.Context, bot Bot, mb *Mailbox, in *phase.Input) error {
	mr, err := bot.Forge.MergeRequest(ctx, mb.Repo, mb.Number)
	if err != nil {
		return fmt.Errorf("read the %s: %w", m.mrWord(bot), err)
	}
	mb.Branch, mb.Data.ReviewHead = mr.SourceBranch, mr.HeadSHA
	since := mb.Data.ReviewedHead
	if since == mr.HeadSHA {
		since = "" // asked again without new commits: review it all again
	}
	in.Review = &phase.ReviewInput{MergeRequest: mb.Number, Author: mr.Author.Login, Title: mr.Title,
		Description: mr.Body, Target: mr.TargetBranch, SinceSHA: since}
	return nil
}

// applyReview posts the run's review: its summary and its inline comments, as a comment-only
// review unless verdicts are configured, then waits for the next request.
func (m *Machine) applyReview(ctx context.Context, bot Bot, mb *Mailbox, r *phase.Result, runID int64) error {
	rv, err := reviews(bot)
	if err != nil {
		return err
	}
	nr := forge.NewReview{Body: m.cfg.Redact(strings.TrimSpace(r.Summary)), HeadSHA: mb.Data.ReviewHead}
	if m.cfg.ReviewVerdicts {
		switch r.ReviewVerdict {
		case phase.VerdictApprove:
			nr.Event = forge.ReviewApprove
		case phase.VerdictRequestChanges:
			nr.Event = forge.ReviewRequestChanges
		}
	}
	// Each part of the review carries a marker of its own, keyed by the run: a pass that failed
	// half-way (GitLab posts one discussion per comment, then the summary) and is applied again
	// posts only what the forge does not show yet.
	posted, err := m.postedKeys(ctx, bot, rv, mb.Ref())
	if err != nil {
		return err
	}
	summary := fmt.Sprintf("review-run%d", runID)
	if posted[summary] {
		// GitLab approves after the summary: a pass that failed on the approval gives it now.
		if err := m.approveIfMissing(ctx, bot, rv, mb, nr); err != nil {
			return err
		}
		mb.Data.ReviewedHead = mb.Data.ReviewHead
		return m.follow(ctx, bot, mb, onReviewPosted)
	}
	nr.Body = Marker(summary, "review") + "\n" + nr.Body
	for i, n := range r.ReviewComments {
		key := fmt.Sprintf("review-run%d-c%d", runID, i+1)
		if posted[key] {
			continue
		}
		nr.Comments = append(nr.Comments, forge.NewReviewComment{
			Position: forge.Position{Path: n.Path, NewLine: n.Line, OldLine: n.OldLine}, Body: Marker(key, "review") + "\n" + m.cfg.Redact(n.Body)})
	}
	if _, err := rv.PostReview(ctx, mb.Repo, mb.Number, nr); err != nil {
		return fmt.Errorf("post the review: %w", err)
	}
	mb.Data.ReviewedHead = mb.Data.ReviewHead
	return m.follow(ctx, bot, mb, onReviewPosted)
}

// approveIfMissing gives the approval the review nr concluded (ReviewApprove) when the merge
// request shows none of the bot's: the review's other parts are on the forge already, so the
// review posted holds nothing but the approval (no body, no comment).
func (m *Machine) approveIfMissing(ctx context.Context, bot Bot, rv forge.Reviews, mb *Mailbox, nr forge.NewReview) error {
	if nr.Event != forge.ReviewApprove {
		return nil
	}
	mg, ok := bot.Forge.(forge.Merger)
	if !ok {
		return nil
	}
	c, err := mg.MergeChecks(ctx, mb.Repo, mb.Number)
	if err != nil {
		return fmt.Errorf("read the approvals: %w", err)
	}
	if containsFold(c.ApprovedBy, bot.Login) {
		return nil
	}
	if _, err := rv.PostReview(ctx, mb.Repo, mb.Number, forge.NewReview{Event: forge.ReviewApprove, HeadSHA: nr.HeadSHA}); err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	return nil
}
