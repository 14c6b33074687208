package webhook_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
)

// FuzzReceiverStore sends arbitrary bodies, event names and delivery ids, correctly signed, to
// the receiver in front of the real PostgreSQL store: never a panic, never a 5xx while the
// database is up, and every 202 is stored and reads back.
func FuzzReceiverStore(f *testing.F) {
	for _, tc := range fixtureCases {
		body, err := os.ReadFile(fixturePath(f, tc.file))
		if err != nil {
			f.Fatal(err)
		}
		event := tc.event
		if event == "" {
			h, _, err := recorded.Load(fixturePath(f, tc.file))
			if err != nil {
				f.Fatal(err)
			}
			event = cmpOr(h.Get("X-Gitlab-Event"), h.Get("X-Forgejo-Event-Type"), h.Get("X-Gitea-Event-Type"), h.Get("X-Gitea-Event"))
		}
		f.Add(strings.HasPrefix(tc.file, "gitlab/"), event, "", body)
	}
	f.Add(false, "issue_comment", strings.Repeat("d", 300), []byte(`{"action":"created","issue":{"number":1},"comment":{"body":"\u0000"},"repository":{"full_name":"o/r"}}`))
	f.Add(true, "Pipeline Hook", "p", []byte(`{"object_kind":"pipeline","object_attributes":{"ref":"main","sha":"abc","status":"success"},"project":{"path_with_namespace":"o/r"}}`))
	f.Add(false, "issues", "id-\xff", []byte(`{"action":"opened","issue":{"number":1,"title":"a\u0000b"},"repository":{"full_name":"o/\u0000"}}`))

	b := newStoreBundle(f)
	f.Fuzz(func(t *testing.T, toGitLab bool, event, delivery string, body []byte) {
		if !headerValue(event) || !headerValue(delivery) {
			return // no HTTP client sends it
		}
		var req *http.Request
		if toGitLab {
			req = forgetest.NewGitLabRequest("/webhooks/gitlab", event, "", testGitLabToken, body)
		} else {
			req = forgetest.NewForgejoRequest("/webhooks/forgejo", event, "", testForgejoSecret, body)
		}
		if delivery != "" {
			req.Header.Set("Idempotency-Key", delivery)
			req.Header.Set("X-Forgejo-Delivery", delivery)
		}
		code, doc := b.post(t, req)
		switch code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest:
		default:
			t.Fatalf("status %d for event %q: %v", code, event, doc)
		}
		if code != http.StatusAccepted {
			return
		}
		forgeName := "forgejo"
		if toGitLab {
			forgeName = "gitlab"
		}
		var mailboxID int64
		if err := b.store.DB().GetContext(context.Background(), &mailboxID, `SELECT mailbox_id FROM events WHERE forge = $1 AND delivery_id = $2`,
			forgeName, doc["delivery"]); err != nil {
			t.Fatalf("202 but not stored: %v", err)
		}
		if _, err := b.store.PendingEvents(context.Background(), mailboxID); err != nil {
			t.Fatalf("stored event does not read back: %v", err)
		}
	})
}

// headerValue reports whether s can be sent as an HTTP header value (no control characters).
func headerValue(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f })
}
