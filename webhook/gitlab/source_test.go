package gitlab

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func srcFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// srcPatch decodes body, lets edit change it and encodes it again.
func srcPatch(t *testing.T, body []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	edit(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

func srcSource(t *testing.T, tokens ...string) *Source {
	t.Helper()
	s, err := NewSource(SourceConfig{Tokens: tokens})
	require.NoError(t, err)
	return s
}

func srcParse(t *testing.T, header string, body []byte) (forge.Event, error) {
	t.Helper()
	return srcSource(t, "t").Parse(forgetest.NewGitLabRequest("/", header, "", "t", body), body)
}

func TestSourceVerify(t *testing.T) {
	t.Parallel()
	s := srcSource(t, "old-token", "new-token")
	body := []byte(`{}`)
	for _, tok := range []string{"old-token", "new-token"} {
		assert.NoError(t, s.Verify(forgetest.NewGitLabRequest("/", "Issue Hook", "", tok, body), body), tok)
	}
	for _, tok := range []string{"", "new-token ", "new-toke", "NEW-TOKEN", "secret-guess"} {
		err := s.Verify(forgetest.NewGitLabRequest("/", "Issue Hook", "", tok, body), body)
		require.ErrorIs(t, err, forge.ErrSignature, "%q", tok)
		if tok != "" {
			assert.NotContains(t, err.Error(), tok)
		}
	}
	assert.Equal(t, forge.KindGitLab, s.Kind())
}

func TestSourceConfig(t *testing.T) {
	t.Parallel()
	_, err := NewSource(SourceConfig{})
	assert.Error(t, err)
	_, err = NewSource(SourceConfig{Tokens: []string{"a", ""}})
	assert.Error(t, err, "an empty token would accept deliveries without a token")
	cfg := SourceConfig{Tokens: []string{"very-secret"}}
	assert.NotContains(t, cfg.String(), "very-secret")
	js, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.NotContains(t, string(js), "very-secret")
}

func TestSourceDeliveryID(t *testing.T) {
	t.Parallel()
	s := srcSource(t, "t")
	body := srcFixture(t, "note_hook_issue.json")
	r := forgetest.NewGitLabRequest("/", "Note Hook", "", "t", body)
	ev, err := s.Parse(r, body)
	require.NoError(t, err)
	assert.Empty(t, ev.DeliveryID, "the receiver falls back to the body hash")

	r.Header.Set("X-Gitlab-Event-UUID", "uuid-1")
	ev, err = s.Parse(r, body)
	require.NoError(t, err)
	assert.Equal(t, "uuid-1", ev.DeliveryID)

	r.Header.Set("Idempotency-Key", "idem-1")
	ev, err = s.Parse(r, body)
	require.NoError(t, err)
	assert.Equal(t, "idem-1", ev.DeliveryID)

	r.Header.Del("X-Gitlab-Event")
	_, err = s.Parse(r, body)
	assert.ErrorIs(t, err, forge.ErrBadPayload)
}

func TestSourceParse(t *testing.T) {
	t.Parallel()
	issueUpdate := srcFixture(t, "issue_hook_update_description_edited.json")
	tests := []struct {
		name   string
		header string
		body   []byte
		ignore string // expected ignore reason, "" for an event
		check  func(t *testing.T, ev forge.Event)
	}{
		{
			name: "close carrying an unchanged changes.labels (quirk 10)", header: "Issue Hook",
			body: srcFixture(t, "issue_hook_close.json"),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventIssueClosed, ev.Type)
				assert.Equal(t, "closed", ev.State)
				assert.Nil(t, ev.PreviousLabels)
				assert.Equal(t, []string{"critical"}, ev.Labels)
				assert.Equal(t, time.Date(2017, 12, 10, 16, 41, 28, 0, time.UTC), ev.OccurredAt)
			},
		},
		{
			name: "confidential issue: only the header says so", header: "Confidential Issue Hook",
			body: srcFixture(t, "issue_hook_confidential_open.json"),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventIssueOpened, ev.Type)
				assert.Equal(t, "Confidential Issue Hook", ev.Header)
			},
		},
		{
			name: "System Hook routes on object_kind", header: "System Hook",
			body: srcFixture(t, "merge_request_hook_open.json"),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventMergeRequestOpened, ev.Type)
				require.NotNil(t, ev.MergeRequest)
				assert.Equal(t, "real6543-main-patch-42541", ev.MergeRequest.SourceBranch)
				assert.Equal(t, "main", ev.MergeRequest.TargetBranch)
				assert.Equal(t, "2f7670508b771e7e77839402be8b34b13787aba8", ev.MergeRequest.HeadSHA)
				assert.Equal(t, forge.User{ID: 4575606, Login: "real6543"}, ev.Author)
			},
		},
		{
			name: "system hook event without object_kind", header: "System Hook",
			body: []byte(`{"event_name":"project_create","name":"x"}`), ignore: `system hook event "project_create" is not used`,
		},
		{
			name: "old Build Hook header, object_kind build", header: "Build Hook",
			body: srcFixture(t, "job_hook_success.json"), ignore: "job events are not used; CI is followed through pipeline events",
		},
		{
			name: "body without object_kind routes on the header", header: "Push Hook",
			body: []byte(`{"ref":"refs/heads/main"}`), ignore: "push events are not used",
		},
		{
			name: "unknown kind", header: "Wiki Page Hook",
			body: []byte(`{"object_kind":"wiki_page"}`), ignore: `Wiki Page Hook events are not used`,
		},
		{
			name: "note update (GitLab 16.11+ action)", header: "Note Hook",
			body: srcPatch(t, srcFixture(t, "note_hook_issue.json"), func(m map[string]any) {
				m["object_attributes"].(map[string]any)["action"] = "update"
			}),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventCommentEdited, ev.Type)
				assert.Equal(t, int64(1241), ev.Comment.ID)
			},
		},
		{
			name: "system note", header: "Note Hook",
			body: srcPatch(t, srcFixture(t, "note_hook_issue.json"), func(m map[string]any) {
				m["object_attributes"].(map[string]any)["system"] = true
			}),
			ignore: "system notes are not used",
		},
		{
			name: "note on a snippet", header: "Note Hook",
			body: srcPatch(t, srcFixture(t, "note_hook_commit.json"), func(m map[string]any) {
				m["object_attributes"].(map[string]any)["noteable_type"] = "Snippet"
			}),
			ignore: "comments on a snippet are not used",
		},
		{
			name: "issue update changing only the milestone", header: "Issue Hook",
			body: srcPatch(t, issueUpdate, func(m map[string]any) {
				m["changes"] = map[string]any{"milestone_id": map[string]any{"previous": nil, "current": 3}}
			}),
			ignore: "issue update changes nothing Alfred uses (changed: milestone_id)",
		},
		{
			name: "issue update changing assignees", header: "Issue Hook",
			body: srcPatch(t, issueUpdate, func(m map[string]any) {
				m["assignees"] = []any{map[string]any{"id": 7, "username": "bob"}}
				m["changes"] = map[string]any{"assignees": map[string]any{
					"previous": []any{map[string]any{"id": 6, "username": "ann"}},
					"current":  []any{map[string]any{"id": 7, "username": "bob"}},
				}}
			}),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventAssignees, ev.Type)
				assert.True(t, ev.AssigneesKnown)
				assert.Equal(t, []string{"bob"}, ev.Assignees)
				assert.Equal(t, []string{"ann"}, ev.PreviousAssignees)
			},
		},
		{
			name: "issue update with labels in a new order only", header: "Issue Hook",
			body: srcPatch(t, issueUpdate, func(m map[string]any) {
				m["changes"] = map[string]any{"labels": map[string]any{
					"previous": []any{map[string]any{"title": "a"}, map[string]any{"title": "b"}},
					"current":  []any{map[string]any{"title": "b"}, map[string]any{"title": "a"}},
				}}
			}),
			ignore: "issue update changes nothing Alfred uses (changed: labels)",
		},
		{
			name: "single-user approval", header: "Merge Request Hook",
			body: srcPatch(t, srcFixture(t, "merge_request_hook_approved.json"), func(m map[string]any) {
				m["object_attributes"].(map[string]any)["action"] = "approval"
			}),
			ignore: "single-user approval is not used; approved/unapproved report the merge request's approval state",
		},
		{
			name: "pipeline", header: "Pipeline Hook",
			body: srcFixture(t, "pipeline_hook_success.json"),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventPipeline, ev.Type)
				assert.Equal(t, &forge.Pipeline{
					ID: 31, State: forge.CISuccess, SHA: "bcbb5ec396a2c0f828686f14fac9b80b780504f2", Ref: "master",
					WebURL: "http://192.168.64.1:3005/gitlab-org/gitlab-test/-/pipelines/31", MergeRequest: 1,
					OfMergeRequest: true, // its source is merge_request_event
				}, ev.Pipeline)
				assert.Equal(t, "test", ev.MergeRequest.SourceBranch)
			},
		},
		{
			// A merged-results pipeline runs on a merge commit of the head into the target: its
			// sha is not the merge request's head, which the hook does not name.
			name: "merged-results pipeline", header: "Pipeline Hook",
			body: srcPatch(t, srcFixture(t, "pipeline_hook_success.json"), func(m map[string]any) {
				oa := m["object_attributes"].(map[string]any)
				oa["status"], oa["ref"], oa["sha"] = "failed", "refs/merge-requests/1/merge", "5d9f1b9c0e3a4f6b8c7d2e1f0a9b8c7d6e5f4a3b"
			}),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.CIFailed, ev.Pipeline.State)
				assert.True(t, ev.Pipeline.MergedResults())
				assert.Equal(t, int64(1), ev.Pipeline.MergeRequest)
				assert.Equal(t, forge.IssueRef{Repo: "gitlab-org/gitlab-test", Number: 1, MergeRequest: true}, ev.Target)
				assert.Empty(t, ev.MergeRequest.HeadSHA, "the merge commit is not the head")
				assert.Equal(t, "test", ev.MergeRequest.SourceBranch)
			},
		},
		{
			// A merged-results pipeline as GitLab sends it (Gitlab::DataBuilder::Pipeline): its
			// ref is the source branch (source_ref), its sha the merge commit, its source
			// merge_request_event. Nothing in the hook tells the merge commit from the head.
			name: "merged-results pipeline as sent", header: "Pipeline Hook",
			body: srcPatch(t, srcFixture(t, "pipeline_hook_success.json"), func(m map[string]any) {
				oa := m["object_attributes"].(map[string]any)
				oa["status"], oa["ref"], oa["sha"] = "failed", "test", "5d9f1b9c0e3a4f6b8c7d2e1f0a9b8c7d6e5f4a3b"
			}),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.CIFailed, ev.Pipeline.State)
				assert.Equal(t, int64(1), ev.Pipeline.MergeRequest)
				assert.Empty(t, ev.MergeRequest.HeadSHA, "a merge request pipeline's sha is not taken for the head")
				assert.True(t, ev.Pipeline.OfMergeRequest, "source merge_request_event")
				assert.True(t, ev.Pipeline.ForMergeRequest(1), "it ran for !1, at a head the mailbox reads")
			},
		},
		{
			name: "failed pipeline without merge request", header: "Pipeline Hook",
			body: srcPatch(t, srcFixture(t, "pipeline_hook_success.json"), func(m map[string]any) {
				m["object_attributes"].(map[string]any)["status"] = "failed"
				delete(m, "merge_request")
			}),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.CIFailed, ev.Pipeline.State)
				assert.Equal(t, forge.IssueRef{Repo: "gitlab-org/gitlab-test"}, ev.Target)
				assert.Nil(t, ev.MergeRequest)
			},
		},
		{
			// client-go's structs reject these values; lenient decoding keeps the delivery.
			name: "odd timestamp and number-typed string field", header: "Merge Request Hook",
			body: srcPatch(t, srcFixture(t, "merge_request_hook_open.json"), func(m map[string]any) {
				oa := m["object_attributes"].(map[string]any)
				oa["last_commit"].(map[string]any)["timestamp"] = "2017-12-10 16:41:28 UTC"
				oa["approvals_before_merge"] = 2
				oa["updated_at"] = "2021-04-28 21:50:00 +0200"
			}),
			check: func(t *testing.T, ev forge.Event) {
				assert.Equal(t, forge.EventMergeRequestOpened, ev.Type)
				assert.Equal(t, "2f7670508b771e7e77839402be8b34b13787aba8", ev.MergeRequest.HeadSHA)
				assert.Equal(t, time.Date(2021, 4, 28, 19, 50, 0, 0, time.UTC), ev.OccurredAt)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, err := srcParse(t, tt.header, tt.body)
			if tt.ignore != "" {
				var ig *forge.IgnoreError
				require.ErrorAs(t, err, &ig)
				assert.Equal(t, tt.ignore, ig.Reason)
				assert.Equal(t, tt.header, ig.Header)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, forge.KindGitLab, ev.Kind)
			tt.check(t, ev)
		})
	}
}

// TestSourceParseLabelsAndAssigneesInOneUpdate: one Issue Hook whose update changed both the
// labels and the assignees (quick actions "/label ~x /assign @bot" in one comment) is a labels
// event that carries the assignee change too, the previous list empty, not unknown.
func TestSourceParseLabelsAndAssigneesInOneUpdate(t *testing.T) {
	t.Parallel()
	bot := map[string]any{"id": 99, "name": "Alfred", "username": "alfred", "avatar_url": ""}
	body := srcPatch(t, srcFixture(t, "issue_hook_update_label_added.json"), func(m map[string]any) {
		m["assignees"] = []any{bot}
		m["changes"].(map[string]any)["assignees"] = map[string]any{"previous": []any{}, "current": []any{bot}}
	})
	ev, err := srcParse(t, "Issue Hook", body)
	require.NoError(t, err)
	assert.Equal(t, forge.EventLabels, ev.Type)
	assert.Equal(t, []string{}, ev.PreviousLabels)
	assert.Equal(t, []string{"critical"}, ev.Labels)
	assert.True(t, ev.AssigneesKnown)
	assert.NotNil(t, ev.PreviousAssignees, "none before: empty, not unknown")
	assert.Empty(t, ev.PreviousAssignees)
	assert.Equal(t, []string{"alfred"}, ev.Assignees)

	// Stored and read back, the empty list stays empty, not unknown.
	out, err := json.Marshal(ev)
	require.NoError(t, err)
	var back forge.Event
	require.NoError(t, json.Unmarshal(out, &back))
	assert.NotNil(t, back.PreviousAssignees)
	assert.NotNil(t, back.PreviousLabels)
}

// TestSourceParseForkMergeRequest: a merge request whose source project is another than its
// target (a fork's) says so, in a merge request event, a note on it and a pipeline of it.
func TestSourceParseForkMergeRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ header, file, key string }{
		{"Merge Request Hook", "merge_request_hook_close.json", "object_attributes"},
		{"Note Hook", "note_hook_merge_request.json", "merge_request"},
		{"Pipeline Hook", "pipeline_hook_success.json", "merge_request"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			for _, fork := range []bool{false, true} {
				body := srcPatch(t, srcFixture(t, tc.file), func(m map[string]any) {
					mr := m[tc.key].(map[string]any)
					mr["source_project_id"], mr["target_project_id"] = 42, 42
					if fork {
						mr["source_project_id"] = 43
					}
				})
				ev, err := srcParse(t, tc.header, body)
				require.NoError(t, err)
				require.NotNil(t, ev.MergeRequest)
				assert.Equal(t, fork, ev.MergeRequest.FromFork)
			}
		})
	}
}

func TestHookCIState(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]forge.CIState{
		"success": forge.CISuccess, "failed": forge.CIFailed, "canceled": forge.CICanceled, "canceling": forge.CICanceled,
		"skipped": forge.CISkipped, "manual": forge.CISkipped, "running": forge.CIPending,
		"pending": forge.CIPending, "created": forge.CIPending, "": forge.CIPending,
	} {
		assert.Equal(t, want, hookCIState(status), status)
	}
}

func TestHookTime(t *testing.T) {
	t.Parallel()
	want := time.Date(2017, 12, 10, 16, 41, 28, 0, time.UTC)
	for _, s := range []string{
		"2017-12-10 16:41:28 UTC", "2017-12-10T16:41:28Z", "2017-12-10T18:41:28+02:00",
		"2017-12-10 18:41:28 +0200", "2017-12-10T16:41:28.000Z",
	} {
		assert.Equal(t, want, hookTime(s), s)
	}
	assert.True(t, hookTime("").IsZero())
	assert.True(t, hookTime("yesterday").IsZero())
}

func TestSourceParseRejects(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"not JSON":         `{"object_kind":`,
		"array":            `[]`,
		"empty":            ``,
		"issue sans iid":   `{"object_kind":"issue","project":{"path_with_namespace":"a/b"},"object_attributes":{"action":"open"}}`,
		"mr sans project":  `{"object_kind":"merge_request","object_attributes":{"iid":3,"action":"open"}}`,
		"pipeline sans id": `{"object_kind":"pipeline","project":{"path_with_namespace":"a/b"}}`,
	} {
		_, err := srcParse(t, "Issue Hook", []byte(body))
		assert.ErrorIs(t, err, forge.ErrBadPayload, name)
	}
	// A field of the wrong type that Alfred does not need is tolerated.
	ev, err := srcParse(t, "Issue Hook", []byte(`{"object_kind":"issue","project":{"path_with_namespace":"a/b"},
		"object_attributes":{"iid":4,"action":"open","weight":"heavy"},"user":{"username":"ann"}}`))
	require.NoError(t, err)
	assert.Equal(t, forge.IssueRef{Repo: "a/b", Number: 4}, ev.Target)
	assert.Equal(t, "ann", ev.Sender.Login)
}

var _ interface {
	Kind() forge.Kind
	Verify(*http.Request, []byte) error
	Parse(*http.Request, []byte) (forge.Event, error)
} = (*Source)(nil)

func TestHookDecodeRetriesWithoutTimes(t *testing.T) {
	t.Parallel()
	body := srcPatch(t, srcFixture(t, "merge_request_hook_open.json"), func(m map[string]any) {
		m["object_attributes"].(map[string]any)["last_commit"].(map[string]any)["timestamp"] = "2017-12-10 16:41:28 UTC"
	})
	var strict gl.MergeEvent
	require.Error(t, json.Unmarshal(body, &strict), "client-go rejects this timestamp")
	var e gl.MergeEvent
	require.NoError(t, hookDecode(body, &e))
	assert.Equal(t, int64(3), e.ObjectAttributes.IID)
	assert.Nil(t, e.ObjectAttributes.LastCommit.Timestamp)
	assert.Error(t, hookDecode([]byte(`{"a":`), &e))
}
