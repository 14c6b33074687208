package mailbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestAddressesBot(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		"@alfred please rename it": true, "thanks @Alfred.": true, "(@alfred)": true,
		"@alfredo do it": false, "mail alfred@example.com": false, "alfred, do it": false, "": false,
	} {
		require.Equal(t, want, addressesBot(body, "alfred"), body)
	}
}

func TestReviewTrigger(t *testing.T) {
	t.Parallel()
	review := func(state string) forge.Event {
		return forge.Event{Type: forge.EventReview, Review: &forge.Review{State: state}}
	}
	require.True(t, reviewTrigger(review("changes_requested"), "alfred"))
	require.True(t, reviewTrigger(review("commented"), "alfred"), "a comment review may carry inline comments")
	require.False(t, reviewTrigger(review("approved"), "alfred"))
	diffNote := forge.Event{Type: forge.EventComment, Comment: &forge.Comment{Body: "typo", Position: &forge.Position{Path: "a", NewLine: 1}}}
	require.True(t, reviewTrigger(diffNote, "alfred"))
	require.True(t, reviewTrigger(forge.Event{Type: forge.EventComment, Comment: &forge.Comment{Body: "@alfred why?"}}, "alfred"))
	require.False(t, reviewTrigger(forge.Event{Type: forge.EventComment, Comment: &forge.Comment{Body: "LGTM"}}, "alfred"))
}

func TestPendingComments(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	alice, bot := forge.User{Login: "alice"}, forge.User{Login: "alfred"}
	pos := func(line int) *forge.Position { return &forge.Position{Path: "report.py", NewLine: line} }
	review := []forge.ReviewComment{
		{ID: 3, Thread: "report.py:+7", Author: alice, Body: "currency", Position: pos(7), CreatedAt: at(1)},
		{ID: 4, Thread: "report.py:+9", Author: alice, Body: "empty note", Position: pos(9), CreatedAt: at(1)},
		{ID: 5, Thread: "review:1", Author: alice, Body: "Two things.", ReviewState: "changes_requested", CreatedAt: at(1)},
		{ID: 6, Thread: "report.py:+5", Author: alice, Body: "why?", Position: pos(5), CreatedAt: at(2)},
		{ID: 7, Thread: "review:2", Author: alice, Body: "One question.", ReviewState: "commented", CreatedAt: at(2)},
		{ID: 8, Thread: "report.py:+9", Author: bot, Body: "Done.", Position: pos(9), CreatedAt: at(3)},
		{ID: 9, Thread: "x", Author: alice, Body: "resolved", Position: pos(1), Resolved: true, CreatedAt: at(1)},
		{ID: 1, Thread: "old", Author: alice, Body: "before", Position: pos(2), CreatedAt: t0.Add(-time.Hour)},
	}
	conversation := []forge.Comment{
		{ID: 10, Author: alice, Body: "@alfred also the docs", CreatedAt: at(4)},
		{ID: 11, Author: alice, Body: "LGTM otherwise", CreatedAt: at(4)},
		{ID: 12, Author: bot, Body: "@alfred self", CreatedAt: at(4)},
	}
	// A follow-up (13) in 3's thread, written while a run worked on 3, before the bot's marked
	// reply to 3 (14): still pending; 3 is answered by 14.
	review = append(review,
		forge.ReviewComment{ID: 13, Thread: "report.py:+7", Author: alice, Body: "and the total row", Position: pos(7), CreatedAt: at(5)},
		forge.ReviewComment{ID: 14, Thread: "report.py:+7", Author: bot, Body: Marker("reply-3-run7", "reply") + "\nAdded it.", Position: pos(7), CreatedAt: at(6)})
	// A thread the bot resolved once it fixed 15 (GitLab): alice's follow-up 17 is resolved in
	// her name, as GitLab does with a reply in a resolved discussion, and is pending. A thread
	// alice resolved herself (18, 19) is not.
	resolved := func(c forge.ReviewComment, by string) forge.ReviewComment {
		c.Resolved, c.ResolvedBy = true, by
		return c
	}
	review = append(review,
		resolved(forge.ReviewComment{ID: 15, Thread: "d15", Author: alice, Body: "rename it", Position: pos(11), CreatedAt: at(1)}, "alfred"),
		resolved(forge.ReviewComment{ID: 16, Thread: "d15", Author: bot, Body: Marker("reply-15-run7", "reply") + "\nRenamed.", Position: pos(11), CreatedAt: at(2)}, "alfred"),
		resolved(forge.ReviewComment{ID: 17, Thread: "d15", Author: alice, Body: "and its test", Position: pos(11), CreatedAt: at(7)}, "alice"),
		resolved(forge.ReviewComment{ID: 18, Thread: "d18", Author: alice, Body: "nit", Position: pos(12), CreatedAt: at(1)}, "alice"),
		resolved(forge.ReviewComment{ID: 19, Thread: "d18", Author: alice, Body: "never mind", Position: pos(12), CreatedAt: at(7)}, "alice"))
	got := pendingComments(review, conversation, "alfred", t0, map[int64]bool{6: true})
	var ids []int64
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	// 3 is answered by the bot's marked reply, 4 in its thread by an unmarked comment of the
	// bot's account, 6 handled, 7 a plain comment summary, 9 resolved, 1 older, 11 does not
	// address the bot, 12 is the bot's; 13 came in 3's thread before the reply to 3; 15 is
	// answered, 17 follows up in the thread the bot resolved, 18 and 19 alice resolved.
	require.Equal(t, []int64{5, 10, 13, 17}, ids)

	in := threadComments(got)
	require.Equal(t, phase.ThreadComment{ID: 13, Thread: "report.py:+7", Author: "alice", Path: "report.py", Line: 7, Body: "and the total row"}, in[2])
	require.Equal(t, phase.ThreadComment{ID: 10, Author: "alice", Body: "@alfred also the docs"}, in[1])
}

func TestReplyBody(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Added it. Fixed in abcdef1.", replyBody(phase.CommentOutcome{Outcome: phase.OutcomeFixed, Reply: "Added it."}, "abcdef1234"))
	require.Equal(t, "Done. Fixed in abcdef1.", replyBody(phase.CommentOutcome{Outcome: phase.OutcomeFixed}, "abcdef1234"))
	require.Equal(t, "Because.", replyBody(phase.CommentOutcome{Outcome: phase.OutcomeAnswered, Reply: " Because. "}, ""))
	require.Equal(t, "I did not change this: out of scope", replyBody(phase.CommentOutcome{Outcome: phase.OutcomeDeclined, Reason: "out of scope"}, "abc"))
}
