package forgetest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// MergeSeeder is the Seeder of RunMergeConformance: Fake, GitLabServer and ForgejoServer.
type MergeSeeder interface {
	ReviewSeeder
	// SetRequiredApprovals makes merges into branch need n approvals.
	SetRequiredApprovals(repo, branch string, n int)
	// ProtectBranch refuses the bot's merges into branch.
	ProtectBranch(repo, branch string)
	// ResolveThreads resolves every review thread of the merge request.
	ResolveThreads(repo string, number int64)
	// MergedWith reads back the method a merge used ("" when not merged through the API).
	MergedWith(repo string, number int64) string
	// SetBranch sets the head commit of a branch, which its merge requests report.
	SetBranch(repo, branch, sha string)
}

// RunMergeConformance runs the behaviour every forge.Merger must show against a fresh forge per
// subtest: newForge returns the forge under test (a forge.Forge that is also a forge.Merger)
// and the Seeder of the same state. The story: alice requests changes with two inline comments
// and asks a question in a second review on the bot's merge request into main, which needs one
// approval.
func RunMergeConformance(t *testing.T, newForge func(t *testing.T) (forge.Forge, MergeSeeder)) {
	t.Helper()
	type bundle struct {
		ctx    context.Context
		f      forge.Forge
		m      forge.Merger
		s      MergeSeeder
		number int64
		head   string
	}
	setup := func(t *testing.T) *bundle {
		t.Helper()
		f, s := newForge(t)
		m, ok := f.(forge.Merger)
		require.True(t, ok, "%T is no forge.Merger", f)
		s.AddRepo(ConformanceRepo, "main", ConformanceCloneURL)
		s.AddUser("alice")
		s.AddUser("bob")
		s.SetAccess(ConformanceRepo, "alice", true)
		s.SetAccess(ConformanceRepo, "bob", true)
		s.SetRequiredApprovals(ConformanceRepo, "main", 1)
		n := s.AddMergeRequest(ConformanceRepo, "agent/issue-1", "main", "Add note column", "")
		s.AddReview(ConformanceRepo, n, "alice", "changes_requested", "Two things to fix.",
			SeedReviewComment{Path: "report.py", NewLine: 7, Body: "Please add a currency column as well."},
			SeedReviewComment{Path: "report.py", NewLine: 9, Body: "An empty note should be written as an empty string."})
		s.AddReview(ConformanceRepo, n, "alice", "commented", "One question.",
			SeedReviewComment{Path: "report.py", NewLine: 5, Body: "Why is the file opened without an encoding?"})
		mr, err := f.MergeRequest(t.Context(), ConformanceRepo, n)
		require.NoError(t, err)
		return &bundle{ctx: t.Context(), f: f, m: m, s: s, number: n, head: mr.HeadSHA}
	}
	approve := func(b *bundle) {
		b.s.AddReview(ConformanceRepo, b.number, "bob", "approved", "")
		b.s.ResolveThreads(ConformanceRepo, b.number)
	}

	t.Run("MergeChecks reads every page of reviews", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.s.SetPageSize(1) // each review on a page of its own; Gitea and Forgejo send no Link here
		b.s.AddReview(ConformanceRepo, b.number, "bob", "approved", "")
		b.s.AddReview(ConformanceRepo, b.number, "bob", "changes_requested", "Not yet.")
		c, err := b.m.MergeChecks(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Contains(t, c.ChangesRequested, "bob", "his latest verdict, on the last page")
	})
	t.Run("MergeChecks reads approvals and open threads", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c, err := b.m.MergeChecks(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Equal(t, 1, c.ApprovalsRequired)
		require.False(t, c.Approved)
		require.Empty(t, c.ApprovedBy)
		require.Equal(t, 3, c.OpenThreads, "three inline comments, three threads")
		require.Equal(t, []string{"alice"}, c.ChangesRequested, "her latest verdict requests changes (GitLab: her reviewer state)")

		b.s.AddReview(ConformanceRepo, b.number, "bob", "approved", "")
		c, err = b.m.MergeChecks(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.True(t, c.Approved)
		require.Equal(t, []string{"bob"}, c.ApprovedBy)
		require.Equal(t, 3, c.OpenThreads)

		b.s.ResolveThreads(ConformanceRepo, b.number)
		c, err = b.m.MergeChecks(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Zero(t, c.OpenThreads)

		_, err = b.m.MergeChecks(b.ctx, ConformanceRepo, 9999)
		require.ErrorIs(t, err, forge.ErrNotFound)
	})

	t.Run("MergeChecks names the head of each approval", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.s.AddReview(ConformanceRepo, b.number, "bob", "approved", "")
		c, err := b.m.MergeChecks(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Equal(t, []forge.Approval{{Login: "bob", SHA: b.head}}, c.Approvals)

		// A push: bob's approval stays (no forge setting dismisses it here) but names the old head.
		next := "1111111111111111111111111111111111111111"
		b.s.SetBranch(ConformanceRepo, "agent/issue-1", next)
		c, err = b.m.MergeChecks(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.Equal(t, []forge.Approval{{Login: "bob", SHA: b.head}}, c.Approvals, "an approval of the earlier head")

		b.s.AddReview(ConformanceRepo, b.number, "alice", "approved", "")
		c, err = b.m.MergeChecks(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.ElementsMatch(t, []forge.Approval{{Login: "bob", SHA: b.head}, {Login: "alice", SHA: next}}, c.Approvals)
	})

	t.Run("Merge merges with the method", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		approve(b)
		require.NoError(t, b.m.Merge(b.ctx, ConformanceRepo, b.number, forge.MergeOptions{Method: forge.MergeSquash, HeadSHA: b.head}))
		require.Equal(t, "squash", b.s.MergedWith(ConformanceRepo, b.number))
		mr, err := b.f.MergeRequest(b.ctx, ConformanceRepo, b.number)
		require.NoError(t, err)
		require.True(t, mr.Merged)
		require.Equal(t, "merged", mr.State)

		err = b.m.Merge(b.ctx, ConformanceRepo, b.number, forge.MergeOptions{})
		require.ErrorIs(t, err, forge.ErrRefused, "a merged request is not merged again")
	})

	t.Run("Merge with rebase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		approve(b)
		require.NoError(t, b.m.Merge(b.ctx, ConformanceRepo, b.number, forge.MergeOptions{Method: forge.MergeRebase}))
		want := "rebase"
		if b.f.Kind() == forge.KindGitLab {
			want = "merge" // the project's merge method: GitLab's merge call has no rebase
		}
		require.Equal(t, want, b.s.MergedWith(ConformanceRepo, b.number))
	})

	t.Run("Merge is refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := b.m.Merge(b.ctx, ConformanceRepo, b.number, forge.MergeOptions{HeadSHA: b.head})
		require.ErrorIs(t, err, forge.ErrRefused, "the required approval is missing: %v", err)

		approve(b)
		err = b.m.Merge(b.ctx, ConformanceRepo, b.number, forge.MergeOptions{HeadSHA: "0123456789abcdef0123456789abcdef01234567"})
		require.ErrorIs(t, err, forge.ErrConflict, "the head moved: %v", err)

		b.s.SetMergeStatus(ConformanceRepo, b.number, forge.MergeStatusConflict)
		err = b.m.Merge(b.ctx, ConformanceRepo, b.number, forge.MergeOptions{HeadSHA: b.head})
		require.ErrorIs(t, err, forge.ErrConflict, "a conflict with the target: %v", err)
		b.s.SetMergeStatus(ConformanceRepo, b.number, forge.MergeStatusMergeable)

		b.s.ProtectBranch(ConformanceRepo, "main")
		err = b.m.Merge(b.ctx, ConformanceRepo, b.number, forge.MergeOptions{HeadSHA: b.head})
		require.True(t, errors.Is(err, forge.ErrRefused) || errors.Is(err, forge.ErrForbidden), "a protected target: %v", err)
		require.Empty(t, b.s.MergedWith(ConformanceRepo, b.number))

		err = b.m.Merge(b.ctx, ConformanceRepo, 9999, forge.MergeOptions{})
		require.ErrorIs(t, err, forge.ErrNotFound)
	})
}
