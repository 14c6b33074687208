package mailbox_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
)

// goldenComment compares a rendered comment with testdata/name; the package's -update flag
// (questions_test.go) rewrites it.
func goldenComment(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./mailbox -update to create %s", path)
	require.Equal(t, string(want), got)
}

// refusals returns the refusal comments of the issue.
func (b *bundle) refusals() []string {
	var out []string
	for _, c := range b.comments() {
		if _, kind, ok := mailbox.ParseMarker(c); ok && kind == "refused" {
			out = append(out, c)
		}
	}
	return out
}

// Hostile: someone without write access floods the open questions with comments. Each person
// is refused once per question round, with one comment that mentions them, however many
// comments they post; a new round refuses them once more. Nothing they write is an answer.
func TestHostileNonWriterFloodRefusedOncePerRound(t *testing.T) {
	t.Parallel()
	b := setup(t) // no type label: round 1 asks the type
	b.fake.AddUser("eve")
	b.fake.SetAccess(repo, "eve", false)
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingType, mb.State)

	for i := range 16 {
		b.deliver(comment("mallory", fmt.Sprintf("task, obviously (%d)", i)))
		mb = b.advance()
	}
	require.Equal(t, mailbox.StateWaitingType, mb.State, "a non-writer answers nothing")
	refused := b.refusals()
	require.Len(t, refused, 1, "sixteen comments, one refusal")
	goldenComment(t, "refused_answers.md", refused[0])

	b.deliver(comment("eve", "bug"))
	b.deliver(comment("eve", "bug!!"))
	b.advance()
	refused = b.refusals()
	require.Len(t, refused, 2, "one refusal per person")
	require.Contains(t, refused[1], "@eve, only a project member with write access can answer my questions")

	// The author answers; the functional analysis asks its own round, where mallory is told once more.
	b.deliver(comment("alice", "task"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	for range 3 {
		b.deliver(comment("mallory", "q1: b"))
		mb = b.advance()
	}
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	refused = b.refusals()
	require.Len(t, refused, 3, "a new round, one more refusal for mallory")
	require.Contains(t, refused[2], "@mallory, only a project member")
	b.requireUniqueMarkers()
}

// Hostile: a writer's comment that answers nothing ("I'll look at this tomorrow") does not
// close the round with the defaults: the questions stay open, the comment is kept as notes for
// the agent, and the answer that follows decides.
func TestHostileWriterCommentThatAnswersNothingKeepsRoundOpen(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("bob")
	b.fake.SetAccess(repo, "bob", true)
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	block := b.lastComment()
	before := len(b.comments())

	b.deliver(comment("bob", "I'll look at this tomorrow"))
	b.deliver(comment("alice", "Good question, let me ask the accounting team."))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the questions stay open")
	require.Equal(t, block, b.lastComment(), "the question block still waits for an answer")
	require.Len(t, b.comments(), before, "nothing posted")
	require.NotContains(t, b.fake.IssueBody(b.ref), "Functional analysis")
	require.Len(t, b.exec.jobs, 1, "no technical analysis ran")

	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	body := b.fake.IssueBody(b.ref)
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	notes, _, _ := strings.Cut(body[strings.Index(body, "### Notes from the discussion"):], "### Expected")
	require.Contains(t, notes, "@bob: I'll look at this tomorrow")
	require.Contains(t, notes, "@alice: Good question, let me ask the accounting team.")

	// An explicit acceptance, with a note, closes a round too.
	b2 := setup(t, "type::task")
	b2.deliver(assign("alice"))
	b2.advance()
	b2.deliver(comment("alice", "Looks sensible.\nok"))
	mb = b2.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Contains(t, b2.fake.IssueBody(b2.ref), "| q1. Which separator? | a. Comma | default |")
}
