package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// selfReviewScript is reviewScript with a self-review that finds a blocking finding (fixed by
// the review_fix step's catch-all rule) and a warning.
const selfReviewScript = reviewScript + `
self_review:
  summary: Read the diff against the plan.
  findings:
    - {path: export.csv, line: 1, severity: blocking, text: "The header lacks the currency column the plan implies."}
    - {severity: warning, text: "No test reads the exported file."}
`

// End to end on Forgejo, with Docker and the script agent: the development leaves two
// findings; the blocking one gets one review_fix round (a commit on the same branch, in the
// same session) before CI and a human; the pull request's description lists the warning that
// is left and the fix; auto-merge merges only once the self-review is over; the mailbox page
// shows the self_review run.
func TestSelfReviewForgejo(t *testing.T) {
	t.Parallel()
	e := startAutoMergeScript(t, forge.KindForgejo, "acceptance/sandbox", selfReviewScript,
		"ALFRED_SELF_REVIEW_ENABLED=true", "ALFRED_LIFECYCLE_AUTO_MERGE=true")
	ms := e.forgejo.(forgetest.MergeSeeder)
	ms.SetRequiredApprovals(e.issue.Repo, "main", 1)
	mr := e.toInReview(func() {
		require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	})

	// The round's commit is the head CI and the human see.
	require.Equal(t, "date,amount,currency", e.git("show", mr.SourceBranch+":export.csv"))
	require.Equal(t, "Add the currency column\nAdd CSV export", e.git("log", "--format=%s", "-2", mr.SourceBranch))
	comments := strings.Join(e.comments(), "\n")
	require.Contains(t, comments, "My self-review of pull request #2 found 1 blocking finding(s): I fixed 1 in")

	body := e.forgejo.MergeRequests(e.issue.Repo)[0].Body
	require.Contains(t, body, "<!-- alfred:section=self_review:start -->\n### Self-review")
	require.Contains(t, body, "**Left for you** (1):\n\n- **warning** (the change as a whole): No test reads the exported file.")
	require.Contains(t, body, "**Fixed before your review** (1):\n\n- **blocking** `export.csv:1`: The header lacks the currency column")
	require.True(t, strings.HasPrefix(body, "Closes #1"), "the description Alfred opened it with is kept")

	// Approved: auto-merge, which waited for the self-review, merges.
	ms.SetBranch(e.issue.Repo, mr.SourceBranch, e.git("rev-parse", mr.SourceBranch)) // the forge sees the push
	ms.AddReview(e.issue.Repo, mr.Number, "alice", "approved", "")
	require.Equal(t, "merge", e.waitMerged(mr.Number))
	mb := e.waitState(mailbox.StateDone)
	e.requireUniqueMarkers()

	page := e.adminPage("/ui/mailboxes/" + strconv.FormatInt(mb.ID, 10))
	require.Contains(t, page, "self_review", "the pages show the self-review run")
}
