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
