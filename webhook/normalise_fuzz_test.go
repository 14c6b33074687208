package webhook

import (
	"testing"
	"unicode/utf8"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// FuzzNormalise: whatever text an event holds, after normalise it is storable (valid UTF-8,
// no NUL) or the event is refused.
func FuzzNormalise(f *testing.F) {
	for _, s := range []string{"", "a\x00b", "\xff\xfe", "ok", "\xc0\x80", "😀"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, text, login string) {
		ev := forge.Event{DeliveryID: "d", Title: text, Body: text, Labels: []string{text}, Sender: forge.User{Login: login},
			Comment: &forge.Comment{Body: text, Author: forge.User{Login: login}}, MergeRequest: &forge.MergeRequest{Title: text}}
		if err := normalise(&ev); err != nil {
			return
		}
		for _, s := range []string{ev.Title, ev.Body, ev.Labels[0], ev.Sender.Login, ev.Comment.Body, ev.MergeRequest.Title} {
			if !utf8.ValidString(s) || !storable(s) { // storable also refuses NUL
				t.Fatalf("not storable after normalise: %q", s)
			}
		}
	})
}
