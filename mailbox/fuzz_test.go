package mailbox_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

var fuzzQuestions = []phase.Question{
	{ID: "q1", Title: "Which separator?", Default: "a", Options: []phase.Option{{ID: "a", Label: "Comma"}, {ID: "b", Label: "Semicolon"}}},
	{ID: "q2", Title: "Header row?", Default: "y", Options: []phase.Option{{ID: "y", Label: "Yes"}, {ID: "n", Label: "No"}}},
}

// FuzzParseReply: a human's reply (any text) never panics, and every answer it finds is one
// of the question's options.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{"q1: b\nq2: n", "1) B 2) yes", "all defaults", "@bot q1 a", "", "q1:", "q9: z", "\x00\xff", strings.Repeat("q1: a\n", 1000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		a := mailbox.ParseReply(body, fuzzQuestions)
		_ = a
		ticks := mailbox.ParseTicks(body, fuzzQuestions)
		for qid, opt := range ticks {
			if !validOption(qid, opt) {
				t.Fatalf("tick %s=%s is no option", qid, opt)
			}
		}
	})
}

func validOption(qid, opt string) bool {
	for _, q := range fuzzQuestions {
		if q.ID != qid {
			continue
		}
		for _, o := range q.Options {
			if o.ID == opt {
				return true
			}
		}
	}
	return false
}

// FuzzMarkersAndSections: markers and description sections read from any text never panic; a
// marker written reads back; a section set reads back and leaves the rest of the text.
func FuzzMarkersAndSections(f *testing.F) {
	for _, s := range []string{"", "plain", mailbox.Marker("plan:1", "plan") + "\nbody", "<!-- alfred:", "<!-- alfred:x:y -->",
		mailbox.SetSection("intro", "alfred-plan", "the plan"), "\x00<!--"} {
		f.Add(s, "section", "content")
	}
	f.Fuzz(func(t *testing.T, body, name, content string) {
		_, _, _ = mailbox.ParseMarker(body)
		_, _ = mailbox.Section(body, name)
		if name == "" || strings.ContainsAny(name, "<>-\n \t") || !utf8.ValidString(name) || strings.Contains(content, "<!--") ||
			strings.Contains(body, "<!--") {
			return
		}
		out := mailbox.SetSection(body, name, content)
		got, ok := mailbox.Section(out, name)
		if !ok || strings.TrimSpace(got) != strings.TrimSpace(content) {
			t.Fatalf("section %q: set %q, read %q (ok %v)", name, content, got, ok)
		}
	})
}

// FuzzSplitComment: any comment splits into parts within the limit, each valid UTF-8 when the
// comment is, that hold the whole text in order; any description is cut within the limit.
func FuzzSplitComment(f *testing.F) {
	for _, s := range []string{"", "short", strings.Repeat("日本語\n", 2000), strings.Repeat("x", 5000), "\xff\xfe" + strings.Repeat("é", 3000)} {
		f.Add(s, 1024)
	}
	f.Fuzz(func(t *testing.T, text string, max int) {
		max = 1024 + abs(max)%8192
		body := mailbox.Marker("k-1", "plan") + "\n" + text
		parts := mailbox.SplitComment(body, max)
		var joined strings.Builder
		for i, p := range parts {
			if len(p) > max {
				t.Fatalf("part %d: %d bytes over %d", i+1, len(p), max)
			}
			if utf8.ValidString(text) && !utf8.ValidString(p) {
				t.Fatalf("part %d cut inside a rune", i+1)
			}
			if len(parts) == 1 {
				joined.WriteString(strings.TrimPrefix(p, mailbox.Marker("k-1", "plan")+"\n"))
				continue
			}
			_, rest, _ := strings.Cut(p, "\n")
			_, rest, _ = strings.Cut(rest, "\n\n")
			joined.WriteString(rest)
		}
		if joined.String() != text {
			t.Fatal("the parts do not hold the text")
		}
		if cut := mailbox.CutDescription(text, max); len(cut) > max {
			t.Fatalf("description cut to %d bytes, over %d", len(cut), max)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
