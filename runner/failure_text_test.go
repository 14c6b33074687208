package runner

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/alfred-bot/alfred/runner/phase"
)

// TestFailureTextCutAtACharacter: the last line of stderr a failure quotes is cut at 300 bytes
// on a character boundary, never inside one (the text is stored and posted).
func TestFailureTextCutAtACharacter(t *testing.T) {
	t.Parallel()
	out := &RunOutcome{Status: StatusFailed, Exit: ExitState{Code: 1}, Stderr: "x" + strings.Repeat("€", 200) + "\n"}
	got := describeFailure(out)
	if !utf8.ValidString(got) {
		t.Fatalf("invalid UTF-8 failure: %q", got[len(got)-12:])
	}
	if !strings.HasSuffix(got, "€…") {
		t.Fatalf("cut elsewhere than at a character: %q", got[len(got)-12:])
	}
}

// TestFailureTextNamesTheClusterDisruption: an evicted run's Pod exits 137 with no result; the
// failure says the cluster ended it, with its reason, not that the agent exited with 137.
func TestFailureTextNamesTheClusterDisruption(t *testing.T) {
	t.Parallel()
	out := &RunOutcome{Status: StatusFailed, Err: phase.ErrNoResult,
		Exit: ExitState{Code: 137, Disrupted: "evicted: The node was low on resource: memory."}}
	want := "the cluster ended the run's Pod (evicted: The node was low on resource: memory.): the agent did not fail"
	if got := describeFailure(out); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
