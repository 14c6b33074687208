package mailbox

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// addressesBot reports whether body mentions the bot ("@alfred", case-insensitive, as a whole
// word).
func addressesBot(body, bot string) bool {
	if bot == "" {
		return false
	}
	re := regexp.MustCompile(`(?i)(^|[^\w@])@` + regexp.QuoteMeta(bot) + `\b`)
	return re.MatchString(body)
}

// reviewTrigger reports whether ev, an event on the bot's merge request by someone else, asks
// for a review_fix: a review that requests changes or comments (its inline comments are read
// through the API: a Forgejo review delivery carries none), a comment on a line of the diff
// (GitLab diff note), or a comment that addresses the bot.
func reviewTrigger(ev forge.Event, bot string) bool {
	switch ev.Type {
	case forge.EventReview:
		return ev.Review != nil && (ev.Review.State == "changes_requested" || ev.Review.State == "commented")
	case forge.EventComment:
		return ev.Comment != nil && (ev.Comment.Position != nil || addressesBot(ev.Comment.Body, bot))
	}
	return false
}

// pendingComments picks, from a merge request's review comments and conversation comments
// (merged by id), those a review_fix run addresses, oldest first: not the bot's, not handled by
// an earlier run, not in a thread a person resolved nor answered by a reply of the bot's (its marker
// names the comment: repliedTo; a thread whose last word is the bot account's in an unmarked
// comment counts as answered), not older than since (zero: no bound), and either placed in the
// diff, addressing the bot, or the body of a review that requests changes. A comment written in
// a thread while a run worked on an earlier one of it is still pending, though the bot's
// marked reply to the earlier one comes after it. A thread the bot resolved (after fixing what
// it said) stays open to follow-ups: GitLab keeps a discussion resolved when someone replies in
// it, in the replier's name, so the thread's resolver is its first comment's.
func pendingComments(review []forge.ReviewComment, conversation []forge.Comment, bot string, since time.Time, handled map[int64]bool) []forge.ReviewComment {
	all := slices.Clone(review)
	for _, c := range conversation {
		if !slices.ContainsFunc(all, func(r forge.ReviewComment) bool { return r.ID == c.ID }) {
			all = append(all, forge.ReviewComment{ID: c.ID, Author: c.Author, Body: c.Body, CreatedAt: c.CreatedAt})
		}
	}
	slices.SortStableFunc(all, func(a, b forge.ReviewComment) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	answered := map[int64]bool{}
	lastByThread := map[string]forge.ReviewComment{}
	resolver := map[string]string{} // thread → who resolved it, from its first comment
	for _, c := range all {
		if _, seen := resolver[c.Thread]; c.Thread != "" && !seen {
			resolver[c.Thread] = c.ResolvedBy
		}
		if strings.EqualFold(c.Author.Login, bot) {
			if id, ok := repliedTo(c.Body); ok {
				answered[id] = true
			}
		}
		if c.Thread != "" {
			lastByThread[c.Thread] = c
		}
	}
	var out []forge.ReviewComment
	for _, c := range all {
		switch {
		case strings.EqualFold(c.Author.Login, bot), handled[c.ID]:
			continue
		case c.Resolved && !(c.Thread != "" && strings.EqualFold(resolver[c.Thread], bot)):
			continue // a person resolved the thread
		case !since.IsZero() && c.CreatedAt.Before(since):
			continue
		case answered[c.ID]:
			continue // answered in its thread
		case c.Thread != "" && unmarkedLast(lastByThread[c.Thread], bot):
			continue // the bot's account had the last word, in a reply with no marker
		case c.Position == nil && !addressesBot(c.Body, bot) && c.ReviewState != "changes_requested":
			continue
		case strings.TrimSpace(c.Body) == "":
			continue
		}
		out = append(out, c)
	}
	return out
}

// unmarkedLast reports whether last, a thread's latest comment, is the bot account's without a
// reply marker (written by hand, or before replies were marked): the thread counts as answered.
func unmarkedLast(last forge.ReviewComment, bot string) bool {
	if !strings.EqualFold(last.Author.Login, bot) {
		return false
	}
	_, marked := repliedTo(last.Body)
	return !marked
}

// repliedTo returns the comment a reply of the bot's answers, from its marker
// ("reply-<comment id>-…", applyReviewFix).
func repliedTo(body string) (int64, bool) {
	key, _, ok := ParseMarker(body)
	if !ok {
		return 0, false
	}
	rest, ok := strings.CutPrefix(key, "reply-")
	if !ok {
		return 0, false
	}
	idText, _, _ := strings.Cut(rest, "-")
	id, err := strconv.ParseInt(idText, 10, 64)
	return id, err == nil
}

// threadComments converts review comments into a run's input.
func threadComments(cs []forge.ReviewComment) []phase.ThreadComment {
	out := make([]phase.ThreadComment, 0, len(cs))
	for _, c := range cs {
		tc := phase.ThreadComment{ID: c.ID, Thread: c.Thread, Author: c.Author.Login, ReviewState: c.ReviewState,
			DiffHunk: c.DiffHunk, Body: c.Body}
		if p := c.Position; p != nil {
			tc.Path, tc.Line, tc.OldLine = p.Path, p.NewLine, p.OldLine
		}
		out = append(out, tc)
	}
	return out
}

// replyBody is the reply Alfred posts in a comment's thread for the run's outcome; sha is the
// run's commit ("" when it pushed none).
func replyBody(o phase.CommentOutcome, sha string) string {
	switch o.Outcome {
	case phase.OutcomeFixed:
		msg := strings.TrimSpace(o.Reply)
		if sha != "" {
			msg = strings.TrimSpace(cmp.Or(msg, "Done.") + " Fixed in " + sha[:min(7, len(sha))] + ".")
		}
		return cmp.Or(msg, "Done.")
	case phase.OutcomeDeclined:
		return "I did not change this: " + strings.TrimSpace(o.Reason)
	}
	return strings.TrimSpace(o.Reply)
}
