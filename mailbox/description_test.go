package mailbox

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestCommentURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://gitlab.example/acme/shop/-/issues/7#note_42", commentURL(forge.KindGitLab, "https://gitlab.example/acme/shop/-/issues/7", 42))
	require.Equal(t, "https://code.example/acme/shop/issues/7#issuecomment-42", commentURL(forge.KindForgejo, "https://code.example/acme/shop/issues/7", 42))
}

// Only Alfred's sections are cleaned; the human's text around them, a bot mention or a secret
// it holds included, is kept byte for byte, and so are broken or unknown markers.
func TestCleanSectionsLeavesTheHumanText(t *testing.T) {
	t.Parallel()
	up := strings.ToUpper
	human := "Hi @alfred-bot, token s3cr3t\r\n<!-- alfred:section=x:end -->\n"
	body := SetSection(human, "functional_analysis", "ours s3cr3t") + "\nafter <!-- alfred:section=y:start --> open"
	got := cleanSections(body, up)
	require.True(t, strings.HasPrefix(got, human))
	s, ok := Section(got, "functional_analysis")
	require.True(t, ok)
	require.Equal(t, "OURS S3CR3T", s)
	require.True(t, strings.HasSuffix(got, "\nafter <!-- alfred:section=y:start --> open"))
	require.Equal(t, "plain", cleanSections("plain", up))
}

// SetSection appends after the human's text without removing a byte of it.
func TestSetSectionAppendsWithoutTrimming(t *testing.T) {
	t.Parallel()
	for _, human := range []string{"text", "text\n", "text\n\n\n", "   ", "\r\n"} {
		out := SetSection(human, "s", "c")
		require.True(t, strings.HasPrefix(out, human), "%q", human)
		require.Contains(t, out, "\n\n<!-- alfred:section=s:start -->")
	}
}

// Notes grow by "@login: text" and stay within maxNotesBytes, the newest kept, valid UTF-8.
func TestAppendNotesIsBounded(t *testing.T) {
	t.Parallel()
	require.Equal(t, "", appendNotes("", "bob", ""))
	require.Equal(t, "@bob: later", appendNotes("", "bob", "later"))
	require.Equal(t, "@bob: later\n\n@eve: no", appendNotes("@bob: later", "eve", "no"))
	notes := ""
	for i := range 2000 {
		notes = appendNotes(notes, "mallory", strings.Repeat("é", i%50)+" flood "+strings.Repeat("x", 20))
	}
	require.LessOrEqual(t, len(notes), maxNotesBytes)
	require.True(t, strings.HasPrefix(notes, notesCut))
	require.True(t, utf8.ValidString(notes))
	require.True(t, strings.HasSuffix(notes, strings.Repeat("é", 1999%50)+" flood "+strings.Repeat("x", 20)), "the newest note is kept")
}
