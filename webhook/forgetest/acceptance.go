package forgetest

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// SeedBareRepo creates, with the host's git, a bare repository at bare with one empty commit
// on main, as the git data of a stand-in's repository (its clone URL, AddRepo).
func SeedBareRepo(tb testing.TB, bare string) {
	tb.Helper()
	work := filepath.Join(tb.TempDir(), "seed")
	for _, args := range [][]string{
		{"init", "--bare", "-b", "main", bare},
		{"init", "-b", "main", work},
		{"-C", work, "-c", "user.name=seed", "-c", "user.email=seed@example.org", "commit", "--allow-empty", "-m", "initial"},
		{"-C", work, "push", bare, "main"},
	} {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(tb, err, "git %v: %s", args, out)
	}
}

// SeedAcceptance seeds s as the end-to-end tests' forge: the repository repo (default branch
// main, cloned from cloneURL), alice, who may write to it, the bot's account "bot", and
// issue #1, "Export the report as CSV" by alice, assigned to the bot, with labels. It returns
// the issue, on forge name forgeName.
func SeedAcceptance(tb testing.TB, s Seeder, forgeName, repo, cloneURL string, labels ...string) forge.IssueRef {
	tb.Helper()
	s.AddRepo(repo, "main", cloneURL)
	s.AddUser("alice")
	s.AddUser("bot")
	s.SetAccess(repo, "alice", true)
	n := s.AddIssue(repo, SeedIssue{Title: "Export the report as CSV", Body: "The monthly report should be downloadable.",
		Author: "alice", Assignees: []string{"bot"}, Labels: labels})
	require.EqualValues(tb, 1, n, "the acceptance issue is the repository's first")
	return forge.IssueRef{Forge: forgeName, Repo: repo, Number: n}
}
