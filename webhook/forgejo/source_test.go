package forgejo

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

func srcFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func srcSource(t *testing.T, secrets ...string) *Source {
	t.Helper()
	s, err := NewSource(SourceConfig{Secrets: secrets})
	require.NoError(t, err)
	return s
}

// srcRequest builds a request with only the given headers (name, value pairs).
func srcRequest(body []byte, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/forgejo", strings.NewReader(string(body)))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func TestSourceVerify(t *testing.T) {
	t.Parallel()
	s := srcSource(t, "old", "new")
	body := srcFixture(t, "forgejo-live/001-issues-opened.json")
	sigOld, sigNew, sigOther := Sign("old", body), Sign("new", body), Sign("other", body)

	for name, r := range map[string]*http.Request{
		"forgejo header, old secret":     srcRequest(body, "X-Forgejo-Signature", sigOld),
		"forgejo header, new secret":     srcRequest(body, "X-Forgejo-Signature", sigNew),
		"gitea header only":              srcRequest(body, "X-Gitea-Signature", sigNew),
		"uppercase hex":                  srcRequest(body, "X-Gitea-Signature", strings.ToUpper(sigNew)),
		"forgejo header wins over gitea": srcRequest(body, "X-Forgejo-Signature", sigNew, "X-Gitea-Signature", "00"),
	} {
		assert.NoError(t, s.Verify(r, body), name)
	}
	for name, r := range map[string]*http.Request{
		"missing":        srcRequest(body),
		"empty":          srcRequest(body, "X-Gitea-Signature", ""),
		"other secret":   srcRequest(body, "X-Forgejo-Signature", sigOther),
		"not hex":        srcRequest(body, "X-Forgejo-Signature", "zz"+sigNew[2:]),
		"short":          srcRequest(body, "X-Forgejo-Signature", sigNew[:32]),
		"sha256= prefix": srcRequest(body, "X-Forgejo-Signature", "sha256="+sigNew),
	} {
		err := s.Verify(r, body)
		require.ErrorIs(t, err, forge.ErrSignature, name)
		assert.NotContains(t, err.Error(), sigOther)
		assert.NotContains(t, err.Error(), sigNew[2:])
	}
	// The body is verified byte for byte: re-encoding the same JSON breaks the signature.
	var v any
	require.NoError(t, json.Unmarshal(body, &v))
	compact, err := json.Marshal(v)
	require.NoError(t, err)
	assert.ErrorIs(t, s.Verify(srcRequest(compact, "X-Forgejo-Signature", sigNew), compact), forge.ErrSignature)
	assert.Equal(t, forge.KindForgejo, s.Kind())
}

// TestSourceFormHook: a "form" hook posts payload=<urlencoded JSON> and signs the JSON.
func TestSourceFormHook(t *testing.T) {
	t.Parallel()
	s := srcSource(t, "sec")
	payload := srcFixture(t, "forgejo-live/001-issues-opened.json")
	body := []byte(url.Values{"payload": {string(payload)}}.Encode())
	r := srcRequest(body, "Content-Type", "application/x-www-form-urlencoded",
		"X-Forgejo-Signature", Sign("sec", payload), "X-Forgejo-Event-Type", "issues")
	require.NoError(t, s.Verify(r, body))
	ev, err := s.Parse(r, body)
	require.NoError(t, err)
	assert.Equal(t, forge.EventIssueOpened, ev.Type)
	assert.Equal(t, int64(1), ev.Target.Number)

	bad := []byte("nopayload=1")
	assert.ErrorIs(t, s.Verify(srcRequest(bad, "Content-Type", "application/x-www-form-urlencoded",
		"X-Forgejo-Signature", Sign("sec", bad)), bad), forge.ErrSignature)
}

func TestSourceConfig(t *testing.T) {
	t.Parallel()
	_, err := NewSource(SourceConfig{})
	assert.Error(t, err)
	_, err = NewSource(SourceConfig{Secrets: []string{""}})
	assert.Error(t, err)
	cfg := SourceConfig{Secrets: []string{"very-secret"}}
	assert.NotContains(t, cfg.String(), "very-secret")
	js, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.NotContains(t, string(js), "very-secret")
}

func TestSourceParse(t *testing.T) {
	t.Parallel()
	statusBody := func(state string) []byte {
		return []byte(`{"id":9,"sha":"0123abcd","context":"ci/build","state":"` + state + `","description":"d",
			"target_url":"https://ci.example/9","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:06Z",
			"repository":{"full_name":"o/r"},"sender":{"id":1,"login":"ci-bot"}}`)
	}
	tests := []struct {
		name    string
		body    []byte
		headers []string
		ignore  string
		check   func(t *testing.T, ev forge.Event)
	}{
		{
			name: "-Type header wins over the coarse one",
			body: srcFixture(t, "gitea-live/012-pull_request_comment-created.json"),
			headers: []string{"X-Gitea-Event", "issue_comment", "X-Gitea-Event-Type", "pull_request_comment",
				"X-Gitea-Delivery", "84e85493-ade3-477c-8371-91da222e77be"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, "pull_request_comment", ev.Header)
				assert.Equal(t, "84e85493-ade3-477c-8371-91da222e77be", ev.DeliveryID)
				assert.Equal(t, forge.EventComment, ev.Type)
				assert.True(t, ev.Target.MergeRequest)
				require.NotNil(t, ev.MergeRequest)
				assert.Equal(t, "feature/csv-export", ev.MergeRequest.SourceBranch)
			},
		},
		{
			name:    "Forgejo delivery header preferred",
			body:    srcFixture(t, "forgejo-live/001-issues-opened.json"),
			headers: []string{"X-Forgejo-Event-Type", "issues", "X-Forgejo-Delivery", "fj-1", "X-Gitea-Delivery", "gt-1"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, "fj-1", ev.DeliveryID)
				assert.Equal(t, forge.User{ID: 2, Login: "alice"}, ev.Author)
				assert.Equal(t, "Export the report as CSV", ev.Title)
			},
		},
		{
			name:    "coarse pull_request_comment carrying a review (the trap)",
			body:    srcFixture(t, "gitea/pull_request_review_comment.json"),
			headers: []string{"X-Gitea-Event", "pull_request_comment"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventReview, ev.Type)
				assert.Equal(t, &forge.Review{State: "commented", Body: "and somethimes you have to comment"}, ev.Review)
			},
		},
		{
			name:    "legacy comment on a PR: issue.pull_request, no is_pull",
			body:    srcFixture(t, "gitea/issue_comment_edited_on_pull_request_legacy.json"),
			headers: []string{"X-Gitea-Event", "issue_comment"},
			check: func(t *testing.T, ev forge.Event) {
				assert.True(t, ev.Target.MergeRequest)
				assert.Equal(t, forge.EventCommentEdited, ev.Type)
			},
		},
		{
			name:    "trimmed payload with a login string as user",
			body:    srcFixture(t, "gitea/forgejo_pull_request_assigned.json"),
			headers: []string{"X-Forgejo-Event-Type", "pull_request_assign"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, "6543", ev.Author.Login)
				assert.Equal(t, []string{"6543"}, ev.Assignees)
			},
		},
		{
			name:    "unassign with null assignees",
			body:    srcFixture(t, "forgejo-live/012-issue_assign-unassigned.json"),
			headers: []string{"X-Forgejo-Event-Type", "issue_assign"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventAssignees, ev.Type)
				assert.True(t, ev.AssigneesKnown)
				assert.Empty(t, ev.Assignees)
			},
		},
		{
			name: "label_cleared empties the list",
			body: []byte(strings.Replace(string(srcFixture(t, "forgejo-live/005-issue_label-label_updated.json")),
				`"action": "label_updated"`, `"action": "label_cleared"`, 1)),
			headers: []string{"X-Forgejo-Event-Type", "issue_label"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventLabels, ev.Type)
				assert.True(t, ev.LabelsKnown)
				assert.Empty(t, ev.Labels)
			},
		},
		{
			name:    "merge closes the linked issue with commit_id",
			body:    srcFixture(t, "forgejo-live/023-issues-closed.json"),
			headers: []string{"X-Forgejo-Event-Type", "issues"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, "3468e4973b0d885ea822f0f6b552699a0b8905a0", ev.ClosedByCommit)
			},
		},
		{
			name:    "merged pull request",
			body:    srcFixture(t, "forgejo-live/022-pull_request-closed.json"),
			headers: []string{"X-Forgejo-Event-Type", "pull_request"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventMergeRequestMerged, ev.Type)
				assert.Equal(t, "closed", ev.State)
				assert.Equal(t, &forge.MergeRequest{
					Number: 2, Title: "Add CSV export", Body: "Closes #1", SourceBranch: "agent/issue-1-some-slug",
					TargetBranch: "main", HeadSHA: "edff22c9ab417cacff2e67342f8b8ddeea107891", State: "merged", Merged: true,
					WebURL: "http://127.0.0.1:3400/acceptance/sandbox/pulls/2", Author: forge.User{ID: 2, Login: "alice"},
				}, ev.MergeRequest)
			},
		},
		{
			name:    "legacy secret in the body never reaches the event (quirk 4)",
			body:    srcFixture(t, "gitea/pull_request_reopened.json"),
			headers: []string{"X-Gitea-Event", "pull_request"},
			check: func(t *testing.T, ev forge.Event) {
				js, err := json.Marshal(ev)
				require.NoError(t, err)
				var b struct{ Secret string }
				require.NoError(t, json.Unmarshal(srcFixture(t, "gitea/pull_request_reopened.json"), &b))
				require.NotEmpty(t, b.Secret)
				assert.NotContains(t, string(js), `"`+b.Secret+`"`)
			},
		},
		{
			name: "status success", body: statusBody("success"), headers: []string{"X-Gitea-Event-Type", "status"},
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventPipeline, ev.Type)
				assert.Equal(t, &forge.Pipeline{ID: 9, State: forge.CISuccess, SHA: "0123abcd", WebURL: "https://ci.example/9"}, ev.Pipeline)
				assert.Equal(t, forge.IssueRef{Repo: "o/r"}, ev.Target)
				assert.Equal(t, "ci-bot", ev.Sender.Login)
				assert.Equal(t, "2026-01-02T03:04:06Z", ev.OccurredAt.Format("2006-01-02T15:04:05Z07:00"))
			},
		},
		{
			name: "status failure", body: statusBody("failure"), headers: []string{"X-Gitea-Event-Type", "status"},
			check: func(t *testing.T, ev forge.Event) { assert.Equal(t, forge.CIFailed, ev.Pipeline.State) },
		},
		{
			name: "status error", body: statusBody("error"), headers: []string{"X-Gitea-Event-Type", "status"},
			check: func(t *testing.T, ev forge.Event) { assert.Equal(t, forge.CIFailed, ev.Pipeline.State) },
		},
		{
			name: "status pending", body: statusBody("pending"), headers: []string{"X-Gitea-Event-Type", "status"},
			check: func(t *testing.T, ev forge.Event) { assert.Equal(t, forge.CIPending, ev.Pipeline.State) },
		},
		{name: "milestone", body: srcFixture(t, "gitea/issues_milestoned.json"), headers: []string{"X-Gitea-Event-Type", "issue_milestone"}, ignore: "milestones are not used"},
		{name: "create", body: []byte(`{"ref":"x"}`), headers: []string{"X-Gitea-Event-Type", "create"}, ignore: "create events are not used"},
		{name: "delete", body: []byte(`{"ref":"x"}`), headers: []string{"X-Gitea-Event-Type", "delete"}, ignore: "delete events are not used"},
		{name: "workflow_run", body: []byte(`{"action":"completed"}`), headers: []string{"X-Gitea-Event-Type", "workflow_run"}, ignore: "workflow_run events are not used"},
		{name: "deleted comment", body: srcFixture(t, "forgejo-live/009-issue_comment-deleted.json"), headers: []string{"X-Forgejo-Event-Type", "issue_comment"}, ignore: "deleted comments are not used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, err := srcSource(t, "s").Parse(srcRequest(tt.body, tt.headers...), tt.body)
			if tt.ignore != "" {
				var ig *forge.IgnoreError
				require.ErrorAs(t, err, &ig)
				assert.Equal(t, tt.ignore, ig.Reason)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, forge.KindForgejo, ev.Kind)
			tt.check(t, ev)
		})
	}
}

func TestSourceParseRejects(t *testing.T) {
	t.Parallel()
	s := srcSource(t, "s")
	for name, tc := range map[string]struct{ event, body string }{
		"no event header":       {"", `{}`},
		"not JSON":              {"issues", `{"action":`},
		"array":                 {"issues", `[]`},
		"issue without number":  {"issues", `{"action":"opened","issue":{},"repository":{"full_name":"o/r"}}`},
		"issue without repo":    {"issues", `{"action":"opened","issue":{"number":1}}`},
		"comment without issue": {"issue_comment", `{"action":"created","comment":{"id":1},"repository":{"full_name":"o/r"}}`},
		"pr without pr":         {"pull_request", `{"action":"opened","repository":{"full_name":"o/r"}}`},
		"status without sha":    {"status", `{"state":"success","repository":{"full_name":"o/r"}}`},
	} {
		var headers []string
		if tc.event != "" {
			headers = []string{"X-Forgejo-Event-Type", tc.event}
		}
		_, err := s.Parse(srcRequest([]byte(tc.body), headers...), []byte(tc.body))
		assert.ErrorIs(t, err, forge.ErrBadPayload, name)
	}
	// Values of the wrong type are skipped, not fatal.
	body := `{"action":"opened","issue":{"number":5,"user":{"id":"x","login":"ann"},"labels":[{"name":"a"},7,"b"],
		"assignees":{"odd":true},"updated_at":12},"repository":{"full_name":"o/r"},"sender":"ann"}`
	ev, err := s.Parse(srcRequest([]byte(body), "X-Forgejo-Event-Type", "issues"), []byte(body))
	require.NoError(t, err)
	assert.Equal(t, forge.IssueRef{Repo: "o/r", Number: 5}, ev.Target)
	assert.Equal(t, "ann", ev.Author.Login)
	assert.Equal(t, "ann", ev.Sender.Login)
	assert.Equal(t, []string{"a", "b"}, ev.Labels)
	assert.True(t, ev.OccurredAt.IsZero())
}

// TestSourceParseForkPullRequest: a pull request whose head is in another repository than its
// base (a fork's) says so; one within the repository does not.
func TestSourceParseForkPullRequest(t *testing.T) {
	t.Parallel()
	s := srcSource(t, "sec")
	parse := func(body []byte) forge.Event {
		t.Helper()
		r := srcRequest(body, "X-Forgejo-Signature", Sign("sec", body), "X-Forgejo-Event-Type", "pull_request")
		ev, err := s.Parse(r, body)
		require.NoError(t, err)
		require.NotNil(t, ev.MergeRequest)
		return ev
	}
	var doc map[string]any
	require.NoError(t, json.Unmarshal(srcFixture(t, "gitea/pull_request_closed.json"), &doc))
	pr := doc["pull_request"].(map[string]any)
	pr["base"].(map[string]any)["repo_id"] = pr["head"].(map[string]any)["repo_id"]
	same, err := json.Marshal(doc)
	require.NoError(t, err)
	assert.False(t, parse(same).MergeRequest.FromFork, "head and base in one repository")
	pr["head"].(map[string]any)["repo_id"] = 99999
	forked, err := json.Marshal(doc)
	require.NoError(t, err)
	assert.True(t, parse(forked).MergeRequest.FromFork, "the head in another repository")
}
