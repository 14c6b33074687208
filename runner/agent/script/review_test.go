package script_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/phase"
)

const reviewScript = `
review_fix:
  summary: Addressed the review.
  commit_message: "fix: currency column"
  files: {report.py: "fixed\n"}
  comment_rules:
    - {match: "WHY", outcome: answered, reply: "Because of the locale."}
    - {match: "", outcome: fixed, reply: "Done."}
conflict_resolution:
  summary: Kept both sides.
  resolve_conflicts: both
review:
  summary: A few remarks.
  review_comments: [{path: docs/report.md, line: 3, body: "Say which month."}]
`

// playScript plays script for in in fresh directories (ws seeded with files) and returns the
// exit code, the workspace and the decoded result.
func playScript(t *testing.T, sc string, in phase.Input, files map[string]string) (int, string, *phase.Result) {
	t.Helper()
	dir, ws, out := t.TempDir(), t.TempDir(), t.TempDir()
	data, err := json.Marshal(in)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "input.json"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, script.ScriptFile), []byte(sc), 0o644))
	for p, c := range files {
		require.NoError(t, os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644))
	}
	var stdout, stderr bytes.Buffer
	code := script.Play([]string{"-script", filepath.Join(dir, script.ScriptFile), "-input", filepath.Join(dir, "input.json"),
		"-workspace", ws, "-out", out}, &stdout, &stderr)
	raw, err := os.ReadFile(filepath.Join(out, phase.ResultFile))
	if err != nil {
		return code, ws, nil
	}
	var r phase.Result
	require.NoError(t, json.Unmarshal(raw, &r))
	return code, ws, &r
}

func TestPlayReviewFixAnswersByRule(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.ReviewFix, Key: "review_fix", Attempt: 1, Review: &phase.ReviewInput{Comments: []phase.ThreadComment{
		{ID: 3, Path: "report.py", Line: 7, Body: "Please add a currency column."},
		{ID: 6, Path: "report.py", Line: 5, Body: "Why is there no encoding?"},
	}}}
	code, ws, r := playScript(t, reviewScript, in, nil)
	require.Zero(t, code)
	require.Equal(t, []phase.CommentOutcome{
		{ID: 3, Outcome: phase.OutcomeFixed, Reply: "Done."},
		{ID: 6, Outcome: phase.OutcomeAnswered, Reply: "Because of the locale."},
	}, r.Comments)
	require.NoError(t, phase.ValidateResult(in, r))
	b, err := os.ReadFile(filepath.Join(ws, "report.py"))
	require.NoError(t, err)
	require.Equal(t, "fixed\n", string(b))
}

func TestPlayConflictResolution(t *testing.T) {
	t.Parallel()
	conflicted := "a\n<<<<<<< HEAD\nours\n||||||| base\nold\n=======\ntheirs\n>>>>>>> main\nz\n"
	in := phase.Input{Phase: phase.ConflictResolution, Key: "conflict_resolution", Attempt: 1,
		Conflict: &phase.ConflictInput{Target: "main", Files: []phase.ConflictFile{{Path: "f.txt", Content: conflicted}}}}
	code, ws, r := playScript(t, reviewScript, in, map[string]string{"f.txt": conflicted})
	require.Zero(t, code)
	require.Equal(t, "Kept both sides.", r.Summary)
	b, err := os.ReadFile(filepath.Join(ws, "f.txt"))
	require.NoError(t, err)
	require.Equal(t, "a\nours\ntheirs\nz\n", string(b))

	for side, want := range map[string]string{"ours": "a\nours\nz\n", "theirs": "a\ntheirs\nz\n"} {
		got, err := script.Resolve(conflicted, side)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err = script.Resolve(conflicted, "mine")
	require.Error(t, err)
	_, err = script.Resolve("<<<<<<< HEAD\nx\n", "ours")
	require.Error(t, err)
}

func TestPlayReviewComments(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.Review, Key: "review", Attempt: 1}
	code, _, r := playScript(t, reviewScript, in, nil)
	require.Zero(t, code)
	require.Equal(t, []phase.ReviewNote{{Path: "docs/report.md", Line: 3, Body: "Say which month."}}, r.ReviewComments)
	require.NoError(t, phase.ValidateResult(in, r))
}
