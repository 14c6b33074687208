package runner

import (
	"strings"
	"testing"
	"unicode/utf8"
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
