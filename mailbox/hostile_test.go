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
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
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

// bigDescription is a human's issue description of about n bytes: many lines of text in
// several scripts, a mention of the bot and a trailing newline.
func bigDescription(n int) string {
	var b strings.Builder
	b.WriteString("Hi @" + forgetest.BotLogin + ", here is everything we know.\n\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%06d. The export of the monthly report — ünïcödé, 日本語, emoji 🙂 — must keep the header row.\n", i)
	}
	return b.String()
}

// sectionComment returns the comment that holds the named section, "" when there is none.
func (b *bundle) sectionComment(name string) string {
	for _, c := range b.comments() {
		if k, _, ok := mailbox.ParseMarker(c); ok && k == "section-"+name {
			return c
		}
	}
	return ""
}

// Hostile: the author's description is about 1 MB, far over what Alfred may write on a
// Forgejo (65,000 bytes). Alfred never cuts it: the stored description is the human's text byte
// for byte, and the functional analysis is a comment of its own, marked and edited in place.
func TestHostileHugeDescriptionIsNeverCut(t *testing.T) {
	t.Parallel()
	limits := mailbox.PostLimits{MaxCommentBytes: mailbox.DefaultForgejoMaxBytes, MaxDescriptionBytes: mailbox.DefaultForgejoMaxBytes}
	b := setupWith(t, guard{limits: &limits}, "type::task")
	b.exec.results["analysis.functional"].Questions = nil
	human := bigDescription(1 << 20)
	require.NoError(t, b.fake.SetIssueBody(t.Context(), b.ref, human))

	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State, "the lifecycle goes on")
	require.Equal(t, human, b.fake.IssueBody(b.ref), "the human's text, byte for byte, and nothing else")
	section := b.sectionComment("functional_analysis")
	require.Contains(t, section, "## Functional analysis")
	require.Contains(t, section, "### Acceptance criteria\n\n- the file opens in a spreadsheet")
	for _, c := range b.comments() {
		require.LessOrEqual(t, len(c), mailbox.DefaultForgejoMaxBytes)
	}
	b.requireUniqueMarkers()
}

// A description that fits alone but not with the section keeps the human's text as a byte-for-
// byte prefix (bot mention and trailing newline untouched) and points to the section's comment.
func TestHostileLongDescriptionGetsAPointer(t *testing.T) {
	t.Parallel()
	limits := mailbox.PostLimits{MaxCommentBytes: 8 << 10, MaxDescriptionBytes: 8 << 10}
	b := setupWith(t, guard{limits: &limits}, "type::analysis")
	b.exec.results["analysis.functional"].Questions = nil
	var long strings.Builder
	for range 60 {
		long.WriteString("a criterion that makes the analysis long enough not to fit\n")
	}
	b.exec.results["analysis.functional"].AcceptanceCriteria = strings.Split(strings.TrimSpace(long.String()), "\n")
	human := bigDescription(6 << 10)
	require.NoError(t, b.fake.SetIssueBody(t.Context(), b.ref, human))

	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	body := b.fake.IssueBody(b.ref)
	require.True(t, strings.HasPrefix(body, human), "the human's text is kept byte for byte")
	pointer := strings.TrimPrefix(body, human)
	goldenComment(t, "section_pointer.md", pointer)
	require.NotContains(t, body, "### Acceptance criteria")
	goldenComment(t, "section_comment.md", b.sectionComment("functional_analysis"))
	goldenComment(t, "analysis_in_comment.md", b.lastComment())
}

// The forge's own limit (GitLab answers 400 "is too long") is met like the guard's: the
// section goes into a comment, the description is left as the human wrote it, and the
// mailbox does not block.
func TestHostileForgeRefusesTheLongDescription(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{limits: &mailbox.PostLimits{}}, "type::task")
	b.exec.results["analysis.functional"].Questions = nil
	human := b.fake.IssueBody(b.ref)
	tooLong := fmt.Errorf("gitlab: edit issue: %w: HTTP 400: description is too long", forge.ErrRefused)
	b.fake.FailNextCall("SetIssueBody", tooLong, tooLong) // the section, then the pointer
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Equal(t, human, b.fake.IssueBody(b.ref))
	require.Contains(t, b.sectionComment("functional_analysis"), "## Functional analysis")
}

// When the section fits again (the human shortened the description, the lifecycle starts
// over), it is back in the description and its comment says so, edited in place.
func TestHostileSectionBackInTheDescription(t *testing.T) {
	t.Parallel()
	limits := mailbox.PostLimits{MaxCommentBytes: 8 << 10, MaxDescriptionBytes: 8 << 10}
	b := setupWith(t, guard{limits: &limits}, "type::analysis")
	b.exec.results["analysis.functional"].Questions = nil
	require.NoError(t, b.fake.SetIssueBody(t.Context(), b.ref, bigDescription(1<<20)))
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	require.Contains(t, b.sectionComment("functional_analysis"), "## Functional analysis")
	comments := len(b.comments())

	require.NoError(t, b.fake.SetIssueBody(t.Context(), b.ref, "Short now."))
	b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true})
	b.advance()
	b.deliver(assign("alice"))
	mb = b.advance()
	require.Equal(t, mailbox.StateInReview, mb.State)
	body := b.fake.IssueBody(b.ref)
	require.True(t, strings.HasPrefix(body, "Short now.\n\n<!-- alfred:section=functional_analysis:start -->\n## Functional analysis"), body)
	goldenComment(t, "section_moved.md", b.sectionComment("functional_analysis"))
	require.Greater(t, len(b.comments()), comments)
	b.requireUniqueMarkers()
}

// Hostile: someone without write access comments "retry" again and again on a blocked issue:
// one refusal per person and block, and the mailbox stays blocked.
func TestHostileNonWriterRetryFloodRefusedOncePerBlock(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.failures["analysis.functional"] = "agent wrote no result"
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	for range 16 {
		b.deliver(comment("mallory", "retry"))
		mb = b.advance()
	}
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Len(t, b.refusals(), 1, "sixteen comments, one refusal")
	require.Contains(t, b.refusals()[0], "@mallory, only a project member with write access can ask me to retry")
	b.requireUniqueMarkers()
}
