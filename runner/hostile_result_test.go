package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

// leaveResult makes the fake container leave body as its result file.
func leaveResult(t *testing.T, body string) func(runner.ContainerSpec) {
	return func(spec runner.ContainerSpec) {
		for _, m := range spec.Mounts {
			if m.Target == runner.OutputDir {
				require.NoError(t, os.WriteFile(filepath.Join(m.Source, phase.ResultFile), []byte(body), 0o644))
			}
		}
	}
}

// TestHostileResultTextsAreCensoredAndStorable: what a run leaves is stored, shown and
// committed only through the censor and as storable text: the error an invalid result makes
// (it quotes the agent's fields), the output with a NUL or invalid UTF-8, a commit message
// with a NUL (git refuses it, which would make the run an infrastructure failure).
func TestHostileResultTextsAreCensoredAndStorable(t *testing.T) {
	t.Parallel()
	run := func(b *execBundle, id int64) *runner.RunOutcome {
		t.Helper()
		out, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 1, RunID: id, Attempt: 1, Worktree: b.worktree,
			Input: phase.Input{Phase: phase.Development, Repo: "g/r", Issue: 7, Title: "x"}})
		require.NoError(t, err)
		return out
	}

	b := setupFake(t, nil)
	b.rt.onStart = leaveResult(t, `{"summary":"s","commit_message":"c",
	  "questions":[{"id":"sekrit","title":"t","options":[{"id":"a","label":"a"},{"id":"b","label":"b"}],"default":"a"},
	               {"id":"sekrit","title":"t","options":[{"id":"a","label":"a"},{"id":"b","label":"b"}],"default":"a"}]}`)
	out := run(b, 2)
	require.Equal(t, runner.StatusFailed, out.Status)
	require.ErrorIs(t, out.Err, phase.ErrInvalidResult, "the cause is still seen")
	require.NotContains(t, out.Err.Error(), "sekrit", "the failure quotes the agent through the censor")

	b = setupFake(t, nil)
	b.rt.onStart = leaveResult(t, `{"summary":"s\u0000","commit_message":"fix\u0000 it"}`)
	b.rt.stdout = "a\x00b\xffc\n"
	out = run(b, 3)
	require.Equal(t, runner.StatusSucceeded, out.Status)
	for name, s := range map[string]string{"output": out.Stdout, "summary": out.Result.Summary, "commit message": out.Result.CommitMessage} {
		require.False(t, strings.ContainsRune(s, 0), "%s keeps a NUL: %q", name, s)
		require.True(t, utf8.ValidString(s), "%s is not valid UTF-8: %q", name, s)
	}
	require.Equal(t, "fix\uFFFD it", out.Result.CommitMessage)
}
