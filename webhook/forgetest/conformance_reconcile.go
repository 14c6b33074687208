package forgetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// runReconcileConformance is the part of RunConformance for what reconciliation reads:
// AssignedIssues, Hooks, CommentsSince and the updated times of Issue and MergeRequest. setup returns
// a forge seeded as RunConformance seeds it and its issue (assigned to alice, not the bot).
func runReconcileConformance(t *testing.T, setup func(t *testing.T) (forge.Forge, Seeder, forge.IssueRef)) {
	t.Helper()

	t.Run("AssignedIssuesAcrossReposAndPages", func(t *testing.T) {
		t.Parallel()
		f, s, ref := setup(t)
		s.AddRepo("acme/other", "main", "file:///srv/git/acme/other.git")
		s.SetPageSize(1)
		bot := s.BotLogin()
		want := map[forge.IssueRef]bool{}
		for _, repo := range []string{ConformanceRepo, "acme/other"} {
			n := s.AddIssue(repo, SeedIssue{Title: "for the bot", Author: "alice", Assignees: []string{bot}})
			want[forge.IssueRef{Repo: repo, Number: n}] = true
		}
		s.AddIssue(ConformanceRepo, SeedIssue{Title: "closed", Author: "alice", Assignees: []string{bot}, Closed: true})
		s.AddIssue(ConformanceRepo, SeedIssue{Title: "bob's", Author: "alice", Assignees: []string{"bob"}})
		mr := s.MergeRequests(ConformanceRepo)
		require.Empty(t, mr)

		got, err := f.AssignedIssues(t.Context(), time.Time{}, 0)
		require.NoError(t, err)
		gotRefs := map[forge.IssueRef]bool{}
		for _, is := range got {
			gotRefs[is.Ref] = true
			require.Equal(t, "open", is.State)
			require.Contains(t, is.Assignees, bot)
			require.False(t, is.UpdatedAt.IsZero(), "UpdatedAt is what makes reconciling cheap")
		}
		require.Equal(t, want, gotRefs, "every page, every repository, open issues of the bot only")
		require.NotContains(t, gotRefs, ref)

		limited, err := f.AssignedIssues(t.Context(), time.Time{}, 1)
		require.NoError(t, err)
		require.Len(t, limited, 1)
	})

	t.Run("HooksEveryPageAdminsOnly", func(t *testing.T) {
		t.Parallel()
		f, s, _ := setup(t)
		bot := s.BotLogin()
		s.SetAccessLevel(ConformanceRepo, bot, 30)
		_, err := f.Hooks(t.Context(), ConformanceRepo)
		require.ErrorIs(t, err, forge.ErrForbidden, "a write member does not read hooks")
		_, err = f.Hooks(t.Context(), "acme/nope")
		require.ErrorIs(t, err, forge.ErrNotFound)

		s.SetAccessLevel(ConformanceRepo, bot, 40)
		none, err := f.Hooks(t.Context(), ConformanceRepo)
		require.NoError(t, err)
		require.Empty(t, none)
		s.SetPageSize(1)
		ours := forge.Hook{URL: "https://alfred.example/webhooks/test", ContentType: "json", Active: true,
			Events: []string{"issues"}}
		ours.ID = s.AddHook(ConformanceRepo, ours)
		other := forge.Hook{URL: "https://ci.example/hook", ContentType: "json", Active: false, Events: []string{"push"}}
		other.ID = s.AddHook(ConformanceRepo, other)
		got, err := f.Hooks(t.Context(), ConformanceRepo)
		require.NoError(t, err)
		require.Equal(t, []forge.Hook{ours, other}, got, "every page, in order, with URL, events and active")
	})

	t.Run("AssignedIssuesSince", func(t *testing.T) {
		t.Parallel()
		f, s, ref := setup(t)
		bot := s.BotLogin()
		old := s.AddIssue(ConformanceRepo, SeedIssue{Title: "old", Author: "alice", Assignees: []string{bot}})
		all, err := f.AssignedIssues(t.Context(), time.Time{}, 0)
		require.NoError(t, err)
		require.Len(t, all, 1)
		since := all[0].UpdatedAt.Add(time.Second)

		s.SetIssueAssignees(ref, "alice", "alice", bot) // assigned while Alfred was not listening
		got, err := f.AssignedIssues(t.Context(), since, 0)
		require.NoError(t, err)
		require.Len(t, got, 1, "only what changed since")
		require.Equal(t, ref.Number, got[0].Ref.Number)
		require.Equal(t, ConformanceRepo, got[0].Ref.Repo)
		require.NotEqual(t, old, got[0].Ref.Number)
	})

	t.Run("IssueUpdatedAtMoves", func(t *testing.T) {
		t.Parallel()
		f, s, ref := setup(t)
		before, err := f.Issue(t.Context(), ref)
		require.NoError(t, err)
		require.False(t, before.UpdatedAt.IsZero())
		s.SetIssueLabels(ref, "alice", "bug", "ai::validate_plan")
		after, err := f.Issue(t.Context(), ref)
		require.NoError(t, err)
		require.True(t, after.UpdatedAt.After(before.UpdatedAt), "a label change moves updated_at")
		require.ElementsMatch(t, []string{"bug", "ai::validate_plan"}, after.Labels)
		s.AddComment(ref, "alice", "q1: b")
		third, err := f.Issue(t.Context(), ref)
		require.NoError(t, err)
		require.True(t, third.UpdatedAt.After(after.UpdatedAt), "a comment moves updated_at")
		s.SetIssueState(ref, "bob", "closed")
		closed, err := f.Issue(t.Context(), ref)
		require.NoError(t, err)
		require.Equal(t, "closed", closed.State)
	})

	t.Run("CommentsSinceAcrossPages", func(t *testing.T) {
		t.Parallel()
		f, s, ref := setup(t)
		s.SetPageSize(1)
		first := s.AddComment(ref, "alice", "first")
		all, err := f.Comments(t.Context(), ref)
		require.NoError(t, err)
		require.Len(t, all, 1)
		since := all[0].UpdatedAt.Add(time.Second)
		second := s.AddComment(ref, "bob", "q1: b")
		third := s.AddComment(ref, "alice", "retry")

		got, err := f.CommentsSince(t.Context(), ref, since)
		require.NoError(t, err)
		require.Equal(t, []int64{second, third}, commentIDs(got), "the newer ones, oldest first, over pages")
		require.Equal(t, "q1: b", got[0].Body)
		require.Equal(t, "bob", got[0].Author.Login)

		s.EditCommentAs(ref, first, "first, edited")
		got, err = f.CommentsSince(t.Context(), ref, since)
		require.NoError(t, err)
		require.Equal(t, []int64{first, second, third}, commentIDs(got), "an edit counts as new")

		none, err := f.CommentsSince(t.Context(), ref, time.Now().Add(24*365*time.Hour*30))
		require.NoError(t, err)
		require.Empty(t, none)

		zero, err := f.CommentsSince(t.Context(), ref, time.Time{})
		require.NoError(t, err)
		require.Len(t, zero, 3)
	})

	t.Run("ActivityNamesWhoChangedWhat", func(t *testing.T) {
		t.Parallel()
		f, s, ref := setup(t)
		s.SetPageSize(1)
		bot := s.BotLogin()
		all, err := f.Activity(t.Context(), ref, time.Time{})
		require.NoError(t, err)
		start := time.Time{}
		if n := len(all); n > 0 {
			start = all[n-1].At.Add(time.Second)
		} else {
			is, err := f.Issue(t.Context(), ref)
			require.NoError(t, err)
			start = is.UpdatedAt.Add(time.Second)
		}
		s.SetIssueLabels(ref, "alice", "bug", "ai::validate_plan")
		s.AddUser("carol")
		// Three added at once: GitLab's note says "assigned to @bob, @carol, and @bot".
		s.SetIssueAssignees(ref, "bob", "alice", "bob", "carol", bot)
		s.SetIssueAssignees(ref, "alice", "alice")
		s.SetIssueState(ref, "bob", "closed")
		s.SetIssueState(ref, "alice", "open")
		require.NoError(t, f.SetLabels(t.Context(), ref, nil, []string{"ai::validate_plan"}))

		got, err := f.Activity(t.Context(), ref, start)
		require.NoError(t, err)
		type row struct {
			Kind         forge.ActivityKind
			Actor, Thing string
		}
		var rows []row
		for _, a := range got {
			require.False(t, a.At.IsZero())
			rows = append(rows, row{a.Kind, a.Actor.Login, a.Label + a.Login})
		}
		require.Equal(t, []row{
			{forge.ActivityLabelAdded, "alice", "ai::validate_plan"},
			{forge.ActivityAssigned, "bob", "bob"},
			{forge.ActivityAssigned, "bob", "carol"},
			{forge.ActivityAssigned, "bob", bot},
			{forge.ActivityUnassigned, "alice", "bob"},
			{forge.ActivityUnassigned, "alice", "carol"},
			{forge.ActivityUnassigned, "alice", bot},
			{forge.ActivityClosed, "bob", ""},
			{forge.ActivityReopened, "alice", ""},
			{forge.ActivityLabelRemoved, bot, "ai::validate_plan"},
		}, rows, "oldest first, over pages, with the actor of each change")
		for i := 1; i < len(got); i++ {
			require.False(t, got[i].At.Before(got[i-1].At))
		}

		comments, err := f.Comments(t.Context(), ref)
		require.NoError(t, err)
		require.Empty(t, comments, "history is not comments (GitLab keeps assignments as system notes)")
	})

	t.Run("MergeRequestUpdatedAt", func(t *testing.T) {
		t.Parallel()
		f, s, _ := setup(t)
		mr, err := f.CreateMergeRequest(t.Context(), ConformanceRepo, forge.NewMergeRequest{
			SourceBranch: "alfred/1-widget", TargetBranch: "main", Title: "Fix widget",
		})
		require.NoError(t, err)
		got, err := f.MergeRequest(t.Context(), ConformanceRepo, mr.Number)
		require.NoError(t, err)
		require.False(t, got.UpdatedAt.IsZero())
		s.MarkMerged(ConformanceRepo, mr.Number)
		merged, err := f.MergeRequest(t.Context(), ConformanceRepo, mr.Number)
		require.NoError(t, err)
		require.True(t, merged.Merged)
		require.True(t, merged.UpdatedAt.After(got.UpdatedAt))
	})
}

func commentIDs(cs []forge.Comment) []int64 {
	out := []int64{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}
