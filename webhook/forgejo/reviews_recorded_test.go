package forgejo_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// TestClientReadsRecordedReviewAnswers serves the API answers recorded on Forgejo 15
// (testdata/forgejo-live-review/api) and checks what the client makes of them.
func TestClientReadsRecordedReviewAnswers(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"/api/v1/repos/acceptance/sandbox/pulls/2/reviews":            "api-pr2-03-reviews.json",
		"/api/v1/repos/acceptance/sandbox/pulls/2/reviews/1/comments": "api-pr2-04-review-1-comments.json",
		"/api/v1/repos/acceptance/sandbox/pulls/2/reviews/2/comments": "api-pr2-05-review-2-comments.json",
		"/api/v1/repos/acceptance/sandbox/pulls/3/reviews":            "api-pr3-01-reviews.json",
		"/api/v1/repos/acceptance/sandbox/pulls/3/reviews/5/comments": "api-pr3-02-review-5-comments.json",
		"/api/v1/repos/acceptance/sandbox/pulls/2":                    "api-pr2-13-after-conflict.json",
		"/api/v1/repos/acceptance/sandbox/pulls/3":                    "api-pr3-04-pull-after-main-change.json",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := answers[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join("testdata", "forgejo-live-review", "api", name))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, "token")
	ctx := t.Context()

	list, err := c.ReviewComments(ctx, "acceptance/sandbox", 2)
	require.NoError(t, err)
	type row struct {
		id     int64
		thread string
		pos    forge.Position
		state  string
		hunk   bool
	}
	var got []row
	for _, rc := range list {
		r := row{id: rc.ID, thread: rc.Thread, state: rc.ReviewState, hunk: rc.DiffHunk != ""}
		if rc.Position != nil {
			r.pos = *rc.Position
		}
		require.Equal(t, "alice", rc.Author.Login)
		got = append(got, r)
	}
	// A review's summary has the id of its comment (#issuecomment-5 of review 1), in the same
	// sequence as the inline comments 3, 4 and 6.
	require.Equal(t, []row{
		{id: 3, thread: "report.py:+7", pos: forge.Position{Path: "report.py", NewLine: 7}, state: "changes_requested", hunk: true},
		{id: 4, thread: "report.py:+9", pos: forge.Position{Path: "report.py", NewLine: 9}, state: "changes_requested", hunk: true},
		{id: 5, thread: "review:1", state: "changes_requested"},
		{id: 6, thread: "report.py:+5", pos: forge.Position{Path: "report.py", NewLine: 5}, state: "commented", hunk: true},
		{id: 7, thread: "review:2", state: "commented"},
	}, got)

	// The review request (REQUEST_REVIEW, review 4) is not a review.
	list, err = c.ReviewComments(ctx, "acceptance/sandbox", 3)
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.Equal(t, "bot", list[0].Author.Login)
	require.Equal(t, &forge.Position{Path: "docs/report.md", NewLine: 3}, list[0].Position)
	require.Equal(t, &forge.Position{Path: "docs/report.md", NewLine: 4}, list[1].Position)
	require.Equal(t, forge.ReviewComment{ID: 17, Thread: "review:5", ReviewID: 5, ReviewState: "commented",
		Author: list[2].Author, Body: "A few remarks on the docs.", CreatedAt: list[2].CreatedAt}, list[2])

	mr, err := c.MergeRequest(ctx, "acceptance/sandbox", 2)
	require.NoError(t, err)
	require.Equal(t, forge.MergeStatusConflict, mr.MergeStatus)
	mr, err = c.MergeRequest(ctx, "acceptance/sandbox", 3)
	require.NoError(t, err)
	require.Equal(t, forge.MergeStatusMergeable, mr.MergeStatus)
}
