package forgetest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestFakeConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunConformance(t, func(t *testing.T) (forge.Forge, forgetest.Seeder) {
		f := forgetest.NewFake(forge.KindGitLab)
		return f, f
	})
}

func TestFakeRecordsCallsAndInjectsErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := forgetest.NewFake(forge.KindForgejo)
	f.AddRepo("o/r", "main", "https://example.test/o/r.git")
	n := f.AddIssue("o/r", forgetest.SeedIssue{Title: "t"})
	ref := forge.IssueRef{Forge: "x", Repo: "o/r", Number: n}

	boom := errors.New("boom")
	f.FailNextCall("Comment", boom)
	_, err := f.Comment(ctx, ref, "hello")
	require.ErrorIs(t, err, boom)
	_, err = f.Comment(ctx, ref, "hello")
	require.NoError(t, err)

	f.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "SetLabels" {
			return forge.ErrForbidden
		}
		return nil
	})
	require.ErrorIs(t, f.SetLabels(ctx, ref, []string{"x"}, nil), forge.ErrForbidden)
	f.SetErrorHook(nil)
	require.NoError(t, f.SetLabels(ctx, ref, []string{"x"}, nil))

	calls := f.Calls()
	require.Len(t, calls, 4)
	require.Equal(t, forgetest.FakeCall{Method: "Comment", Repo: "o/r", Ref: ref, Args: []string{"hello"}}, calls[0])
	require.Equal(t, "SetLabels", calls[3].Method)
	require.Equal(t, forge.KindForgejo, f.Kind())
	require.Equal(t, []string{"x"}, f.IssueLabels(ref))
}
