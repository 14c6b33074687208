package forgetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// RunPollConformance runs what every forge.Poller must show against a fresh forge per subtest
// (newForge returns the poller under test and the Seeder of the same state, with pages of two
// items): an assignment, a comment, a label change on an assigned issue and a review and a merge
// of the bot's merge request each name their thread at or after the time they happened; since
// leaves older changes out; the bot's own changes are not reported; a 429 is retried.
func RunPollConformance(t *testing.T, newForge func(t *testing.T) (forge.Poller, ReviewSeeder)) {
	t.Helper()
	setup := func(t *testing.T) (forge.Poller, ReviewSeeder, forge.IssueRef) {
		p, s := newForge(t)
		s.SetPageSize(2)
		s.AddRepo(ConformanceRepo, "main", ConformanceCloneURL)
		s.AddUser("alice")
		n := s.AddIssue(ConformanceRepo, SeedIssue{Title: "Widget is broken", Body: "It broke.", Author: "alice"})
		return p, s, forge.IssueRef{Repo: ConformanceRepo, Number: n}
	}
	refs := func(cs []forge.Change) []forge.IssueRef {
		var out []forge.IssueRef
		for _, c := range cs {
			if !slices.Contains(out, c.Ref) {
				out = append(out, c.Ref)
			}
		}
		return out
	}
	newest := func(cs []forge.Change) time.Time {
		var at time.Time
		for _, c := range cs {
			at = maxTime(at, c.UpdatedAt)
		}
		return at
	}

	t.Run("NothingConcernsTheBot", func(t *testing.T) {
		t.Parallel()
		p, s, ref := setup(t)
		s.AddComment(ref, "alice", "a comment on an issue the bot has nothing to do with")
		cs, err := p.Changes(t.Context(), time.Time{})
		require.NoError(t, err)
		require.Empty(t, cs)
	})

	t.Run("AssignmentCommentLabels", func(t *testing.T) {
		t.Parallel()
		p, s, ref := setup(t)
		s.SetIssueAssignees(ref, "alice", BotLogin)
		cs, err := p.Changes(t.Context(), time.Time{})
		require.NoError(t, err)
		require.Equal(t, []forge.IssueRef{ref}, refs(cs), "the assignment")
		cursor := newest(cs)

		// Nothing new: at most the thread at the cursor itself (since is inclusive).
		cs, err = p.Changes(t.Context(), cursor.Add(time.Second))
		require.NoError(t, err)
		require.Empty(t, cs, "since leaves older changes out")

		s.AddComment(ref, "alice", "q1: b")
		cs, err = p.Changes(t.Context(), cursor.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, []forge.IssueRef{ref}, refs(cs), "a comment")
		require.True(t, newest(cs).After(cursor))
		cursor = newest(cs)

		s.SetIssueLabels(ref, "alice", "type::task")
		cs, err = p.Changes(t.Context(), cursor.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, []forge.IssueRef{ref}, refs(cs), "a label change of an assigned issue")
	})

	t.Run("BotsOwnComment", func(t *testing.T) {
		t.Parallel()
		p, s, ref := setup(t)
		s.SetIssueAssignees(ref, "alice", BotLogin)
		cs, err := p.Changes(t.Context(), time.Time{})
		require.NoError(t, err)
		cursor := newest(cs)
		s.AddComment(ref, BotLogin, "Thanks @alice, I am on it.")
		cs, err = p.Changes(t.Context(), cursor.Add(time.Second))
		require.NoError(t, err)
		// GitLab's assigned issues move with any comment; the notifications and to-do items
		// do not report the bot's own. Whatever comes, nothing but this issue.
		for _, c := range cs {
			require.Equal(t, ref, c.Ref)
		}
	})

	t.Run("ReviewAndMergeOfTheBotsMergeRequest", func(t *testing.T) {
		t.Parallel()
		p, s, _ := setup(t)
		n := s.AddMergeRequest(ConformanceRepo, "agent/issue-1", "main", "Fix the widget", BotLogin)
		mr := forge.IssueRef{Repo: ConformanceRepo, Number: n, MergeRequest: true}
		cs, err := p.Changes(t.Context(), time.Time{})
		require.NoError(t, err)
		cursor := newest(cs).Add(time.Second)
		s.AddReview(ConformanceRepo, n, "alice", "changes_requested", "One thing.",
			SeedReviewComment{Path: "widget.go", NewLine: 1, Body: "Please rename."})
		cs, err = p.Changes(t.Context(), cursor)
		require.NoError(t, err)
		require.Equal(t, []forge.IssueRef{mr}, refs(cs), "a review")
		cursor = newest(cs).Add(time.Second)
		s.MarkMerged(ConformanceRepo, n)
		cs, err = p.Changes(t.Context(), cursor)
		require.NoError(t, err)
		require.Equal(t, []forge.IssueRef{mr}, refs(cs), "a merge")
	})

	t.Run("ManyPages", func(t *testing.T) {
		t.Parallel()
		p, s, _ := setup(t)
		var want []forge.IssueRef
		for range 5 {
			n := s.AddIssue(ConformanceRepo, SeedIssue{Title: "t", Author: "alice"})
			ref := forge.IssueRef{Repo: ConformanceRepo, Number: n}
			s.SetIssueAssignees(ref, "alice", BotLogin)
			want = append(want, ref)
		}
		cs, err := p.Changes(t.Context(), time.Time{})
		require.NoError(t, err)
		require.ElementsMatch(t, want, refs(cs), "every page is read")
	})

	t.Run("RateLimited", func(t *testing.T) {
		t.Parallel()
		p, s, ref := setup(t)
		s.SetIssueAssignees(ref, "alice", BotLogin)
		s.RateLimitNext(1)
		cs, err := p.Changes(t.Context(), time.Time{})
		require.NoError(t, err, "a 429 is retried after Retry-After")
		require.Equal(t, []forge.IssueRef{ref}, refs(cs))
	})
}
