package gitlab

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// An internal note is for the project's members alone, and what Alfred writes is public: its
// delivery is not acted on, and the notes Alfred reads (the agent's input, reconciliation, the
// review threads) leave it out.
func TestInternalNotesAreNotRead(t *testing.T) {
	t.Parallel()
	note := func(id int, body string, internal bool) string {
		return fmt.Sprintf(`{"id":%d,"body":%q,"system":false,"internal":%t,"confidential":%t,`+
			`"author":{"id":2,"username":"alice"},"created_at":"2026-11-29T10:00:0%dZ","updated_at":"2026-11-29T10:00:0%dZ"}`,
			id, body, internal, internal, id, id)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch p := r.URL.EscapedPath(); {
		case strings.HasSuffix(p, "/issues/3/notes"):
			_, _ = fmt.Fprint(w, "["+note(1, "public answer", false)+","+note(2, "the customer is ACME, do not say", true)+"]")
		case strings.HasSuffix(p, "/merge_requests/4/discussions"):
			_, _ = fmt.Fprintf(w, `[{"id":"d1","individual_note":true,"notes":[%s]},{"id":"d2","individual_note":true,"notes":[%s]}]`,
				note(3, "looks fine", false), note(4, "internal: the fix is for ACME", true))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	c, err := NewClient(ClientConfig{BaseURL: s.URL, Token: "t", MaxRetries: -1})
	require.NoError(t, err)

	for _, since := range []time.Time{{}, time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)} {
		cs, err := c.CommentsSince(t.Context(), forge.IssueRef{Repo: "acme/shop", Number: 3}, since)
		require.NoError(t, err)
		require.Len(t, cs, 1)
		require.Equal(t, "public answer", cs[0].Body)
	}
	rc, err := c.ReviewComments(t.Context(), "acme/shop", 4)
	require.NoError(t, err)
	require.Len(t, rc, 1)
	require.Equal(t, "looks fine", rc[0].Body)

	body := srcPatch(t, srcFixture(t, "note_hook_confidential_issue_comment.json"), func(m map[string]any) {
		m["object_attributes"].(map[string]any)["internal"] = true
	})
	_, err = srcParse(t, "Confidential Note Hook", body)
	var ig *forge.IgnoreError
	require.ErrorAs(t, err, &ig, "an internal note's delivery is not acted on")
	ev, err := srcParse(t, "Confidential Note Hook", srcFixture(t, "note_hook_confidential_issue_comment.json"))
	require.NoError(t, err, "a note on a confidential issue is read as any note")
	require.Equal(t, forge.EventComment, ev.Type)
}
