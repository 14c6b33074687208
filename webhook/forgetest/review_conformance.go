package forgetest

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// ReviewSeeder is the Seeder of RunReviewConformance: Fake, GitLabServer and ForgejoServer.
type ReviewSeeder interface {
	Seeder
	// AddMergeRequest opens a merge request and returns its number.
	AddMergeRequest(repo, source, target, title, author string) int64
	// AddReview submits a review with inline comments and returns the comments' ids.
	AddReview(repo string, number int64, login, state, body string, comments ...SeedReviewComment) []int64
	// RequestReview asks login to review.
	RequestReview(repo string, number int64, login string)
	// SetMergeStatus sets the mergeability the forge reports.
	SetMergeStatus(repo string, number int64, st forge.MergeStatus)
	// ThreadComments reads the inline comments and replies back.
	ThreadComments(repo string, number int64) []forge.ReviewComment
	// AddThreadReply adds a person's reply to a review thread and returns its id.
	AddThreadReply(repo string, number int64, thread, login, body string) int64
}

// RunReviewConformance runs the behaviour every forge.Reviews must show, and the merge status
// that Forge.MergeRequest reports, against a fresh forge per subtest: newForge returns the
// forge under test (a forge.Forge that is also a forge.Reviews) and the Seeder of the same
// state. The story is the one recorded on Forgejo: alice requests changes on the bot's merge
// request with two inline comments and asks a question in a second review. It is long because
// it is one t.Run per clause of the Reviews contract, each reading as the clause it proves.
func RunReviewConformance(t *testing.T, newForge func(t *testing.T) (forge.Forge, ReviewSeeder)) {
	t.Helper()
	type bundle struct {
		ctx    context.Context
		f      forge.Forge
		r      forge.Reviews
		s      ReviewSeeder
		number int64
		ids    []int64 // inline comments at report.py +7, +9, +5
	}
	setup := func(t *testing.T) *bundle {
		t.Helper()
		f, s := newForge(t)
		r, ok := f.(forge.Reviews)
		require.True(t, ok, "%T is no forge.Reviews", f)
		s.AddRepo(ConformanceRepo, "main", ConformanceCloneURL)
		s.AddUser("alice")
		s.AddUser("bob")
		s.SetAccess(ConformanceRepo, "alice", true)
		n := s.AddMergeRequest(ConformanceRepo, "agent/issue-1", "main", "Add note column", "")
		s.RequestReview(ConformanceRepo, n, "bob")
		ids := s.AddReview(ConformanceRepo, n, "alice", "changes_requested", "Two things to fix.",
			SeedReviewComment{Path: "report.py", NewLine: 7, Body: "Please add a currency column as well."},
			SeedReviewComment{Path: "report.py", NewLine: 9, Body: "An empty note should be written as an empty string."})
		ids = append(ids, s.AddReview(ConformanceRepo, n, "alice", "commented", "One question.",
			SeedReviewComment{Path: "report.py", NewLine: 5, Body: "Why is the file opened without an encoding?"})...)
		return &bundle{ctx: t.Context(), f: f, r: r, s: s, number: n, ids: ids}
	}
	inline := func(t *testing.T, b *bundle) map[int64]forge.ReviewComment {
		t.Helper()
		list, err := b.r.ReviewComments(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		out := map[int64]forge.ReviewComment{}
		for _, c := range list {
			if c.Position != nil {
				out[c.ID] = c
			}
		}
		return out
	}
	// visible reports whether body is a general comment of the review threads or of the merge
	// request (forges differ in where a review's summary lives).
	visible := func(t *testing.T, b *bundle, body string) bool {
		t.Helper()
		list, err := b.r.ReviewComments(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		if slices.ContainsFunc(list, func(c forge.ReviewComment) bool { return c.Body == body && c.Position == nil }) {
			return true
		}
		cs, err := b.f.Comments(b.ctx, forge.IssueRef{Repo: ConformanceRepo, Number: b.number, MergeRequest: true})
		require.NoError(t, err)
		return slices.ContainsFunc(cs, func(c forge.Comment) bool { return c.Body == body })
	}

	t.Run("ReviewComments", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		list, err := b.r.ReviewComments(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		var got []forge.ReviewComment
		for _, c := range list {
			require.NotEqual(t, "bob", c.Author.Login, "a review request is not a review")
			if c.Position != nil {
				got = append(got, c)
			}
		}
		require.Len(t, got, 3)
		for i, want := range []forge.Position{{Path: "report.py", NewLine: 7}, {Path: "report.py", NewLine: 9}, {Path: "report.py", NewLine: 5}} {
			require.Equal(t, b.ids[i], got[i].ID)
			require.Equal(t, want, *got[i].Position)
			require.Equal(t, "alice", got[i].Author.Login)
			require.NotEmpty(t, got[i].Thread)
			require.False(t, got[i].CreatedAt.IsZero())
			require.False(t, got[i].Resolved)
		}
		require.Equal(t, "Please add a currency column as well.", got[0].Body)
		require.NotEqual(t, got[0].Thread, got[1].Thread)
		require.True(t, visible(t, b, "Two things to fix."))
		require.True(t, visible(t, b, "One question."))

		_, err = b.r.ReviewComments(b.ctx, ConformanceRepo, 9999)
		require.ErrorIs(t, err, forge.ErrNotFound)
	})

	t.Run("Reply in the thread of an inline comment", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		to := inline(t, b)[b.ids[0]]
		id, err := b.r.Reply(b.ctx, ConformanceRepo, b.number, to, "Added a currency column.")
		require.NoError(t, err)
		require.NotZero(t, id)
		got := inline(t, b)
		reply, ok := got[id]
		require.True(t, ok, "the reply is an inline comment of the thread: %v", got)
		require.Equal(t, b.s.BotLogin(), reply.Author.Login)
		require.Equal(t, "Added a currency column.", reply.Body)
		require.Equal(t, to.Thread, reply.Thread)
		require.Equal(t, *to.Position, *reply.Position)
		require.Len(t, b.s.ThreadComments(ConformanceRepo, b.number), 4)
	})

	t.Run("Reply to a comment without position", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, err := b.r.Reply(b.ctx, ConformanceRepo, b.number, forge.ReviewComment{ID: 1, Body: "x"}, "Thanks, done.")
		require.NoError(t, err)
		require.NotZero(t, id)
		require.True(t, visible(t, b, "Thanks, done."))
	})

	t.Run("ResolveThread", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		to := inline(t, b)[b.ids[1]]
		require.NoError(t, b.r.ResolveThread(b.ctx, ConformanceRepo, b.number, to.Thread))
		if b.f.Kind() == forge.KindGitLab {
			got := inline(t, b)
			require.True(t, got[b.ids[1]].Resolved)
			require.Equal(t, b.s.BotLogin(), got[b.ids[1]].ResolvedBy)
			require.False(t, got[b.ids[0]].Resolved)
			require.Empty(t, got[b.ids[0]].ResolvedBy)
			// A reply in the resolved discussion: GitLab resolves it in its author's name, and
			// the discussion stays resolved.
			follow := b.s.AddThreadReply(ConformanceRepo, b.number, to.Thread, "alice", "Not quite: the header too.")
			got = inline(t, b)
			require.True(t, got[follow].Resolved)
			require.Equal(t, "alice", got[follow].ResolvedBy)
			require.Equal(t, to.Thread, got[follow].Thread)
		}
	})

	t.Run("PostReview", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.r.PostReview(b.ctx, ConformanceRepo, b.number, forge.NewReview{
			Body: "A few remarks.",
			Comments: []forge.NewReviewComment{
				{Position: forge.Position{Path: "docs/report.md", NewLine: 3}, Body: "Say which month."},
				{Position: forge.Position{Path: "docs/report.md", OldLine: 4}, Body: "Why was this removed?"},
			},
		})
		require.NoError(t, err)
		var mine []forge.ReviewComment
		for _, c := range inline(t, b) {
			if c.Author.Login == b.s.BotLogin() {
				mine = append(mine, c)
			}
		}
		slices.SortFunc(mine, func(a, b forge.ReviewComment) int { return int(a.ID - b.ID) })
		require.Len(t, mine, 2)
		require.Equal(t, forge.Position{Path: "docs/report.md", NewLine: 3}, *mine[0].Position)
		require.Equal(t, "Say which month.", mine[0].Body)
		require.Equal(t, forge.Position{Path: "docs/report.md", OldLine: 4}, *mine[1].Position)
		require.True(t, visible(t, b, "A few remarks."))

		_, err = b.r.PostReview(b.ctx, ConformanceRepo, b.number, forge.NewReview{
			Body: "x", Comments: []forge.NewReviewComment{{Position: forge.Position{Path: "docs/report.md"}, Body: "no line"}},
		})
		require.ErrorIs(t, err, forge.ErrConflict)
	})

	t.Run("MergeRequest reports the merge status", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mr, err := b.f.MergeRequest(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Equal(t, forge.MergeStatusMergeable, mr.MergeStatus)
		b.s.SetMergeStatus(ConformanceRepo, b.number, forge.MergeStatusConflict)
		mr, err = b.f.MergeRequest(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Equal(t, forge.MergeStatusConflict, mr.MergeStatus)
		b.s.MarkMerged(ConformanceRepo, b.number)
		mr, err = b.f.MergeRequest(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Equal(t, forge.MergeStatusUnknown, mr.MergeStatus, "a merged request has no merge status")
	})
}
