package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// storeBundle is the receiver in front of the real PostgreSQL store.
type storeBundle struct {
	srv   *httptest.Server
	store *sqlstore.Store
}

func newStoreBundle(t testing.TB) *storeBundle {
	db, _ := pgtest.New(t)
	store := postgres.New(db, nil)
	fj, err := forgejo.NewSource(forgejo.SourceConfig{Secrets: []string{testForgejoSecret}})
	require.NoError(t, err)
	gl, err := gitlab.NewSource(gitlab.SourceConfig{Tokens: []string{testGitLabToken}})
	require.NoError(t, err)
	rc, err := webhook.NewReceiver(webhook.ReceiverConfig{Sources: map[string]webhook.Source{"forgejo": fj, "gitlab": gl},
		Inbox: store, Ready: store.Ping, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return &storeBundle{srv: srv, store: store}
}

func (b *storeBundle) post(t testing.TB, r *http.Request) (int, map[string]string) {
	t.Helper()
	u := b.srv.URL + r.URL.Path
	req, err := http.NewRequest(r.Method, u, r.Body)
	require.NoError(t, err)
	req.Header = r.Header
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var doc map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc
}

// readFixture reads a recorded delivery by its table name (fixturePath).
// onlyPending returns the mailbox of ref and its one pending event, failing t when there is
// not exactly one.
func (b *storeBundle) onlyPending(t *testing.T, ref forge.IssueRef) (*mailbox.Mailbox, forge.Event) {
	t.Helper()
	m, err := b.store.Find(context.Background(), ref)
	require.NoError(t, err)
	evs, err := b.store.PendingEvents(context.Background(), m.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	return m, evs[0].Event
}

func readFixture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixturePath(t, rel))
	require.NoError(t, err)
	return b
}

// A pipeline or commit status on a branch that is not Alfred's (every CI run on main), or of a
// merge request that is not Alfred's, is ignored by the store: the edge answers 200 with the
// reason, never 503.
func TestStorePipelineOnMainIsIgnored(t *testing.T) {
	b := newStoreBundle(t)
	var pipe map[string]any
	require.NoError(t, json.Unmarshal(readFixture(t, "gitlab/pipeline_hook_success.json"), &pipe))
	pipe["object_attributes"].(map[string]any)["ref"] = "main"
	pipe["merge_request"] = nil
	body, err := json.Marshal(pipe)
	require.NoError(t, err)
	code, doc := b.post(t, forgetest.NewGitLabRequest("/webhooks/gitlab", "Pipeline Hook", "pipe-main", testGitLabToken, body))
	require.Equal(t, http.StatusOK, code, "%v", doc)
	require.Equal(t, "ignored", doc["status"])
	require.Contains(t, doc["reason"], "no merge request or branch of Alfred's")

	// The recorded merge request pipeline (!1, source merge_request_event) of a merge request
	// that is not Alfred's: ignored, no mailbox made for it.
	code, doc = b.post(t, forgetest.NewGitLabRequest("/webhooks/gitlab", "Pipeline Hook", "pipe-mr-1", testGitLabToken,
		readFixture(t, "gitlab/pipeline_hook_success.json")))
	require.Equal(t, http.StatusOK, code, "%v", doc)
	require.Equal(t, "ignored", doc["status"])
	_, err = b.store.Find(context.Background(), forge.IssueRef{Forge: "gitlab", Repo: "gitlab-org/gitlab-test", Number: 1, MergeRequest: true})
	require.ErrorIs(t, err, mailbox.ErrNotFound, "no mailbox is made for someone else's merge request's pipeline")

	status := []byte(`{"id":1,"sha":"1234567890abcdef1234567890abcdef12345678","state":"success","context":"ci",
		"repository":{"full_name":"acceptance/sandbox"},"sender":{"login":"alice"}}`)
	code, doc = b.post(t, forgetest.NewForgejoRequest("/webhooks/forgejo", "status", "status-main", testForgejoSecret, status))
	require.Equal(t, http.StatusOK, code, "%v", doc)
	require.Equal(t, "ignored", doc["status"])
}

// Text PostgreSQL cannot store is normalised before it is stored, so the mailbox that copies
// it can be saved; identifiers that cannot be stored are refused with 400.
func TestStoreUnstorableInput(t *testing.T) {
	b := newStoreBundle(t)
	tmpl := readFixture(t, "forgejo-live/006-issue_comment-created.json")
	edit := func(f func(d map[string]any)) []byte {
		var d map[string]any
		require.NoError(t, json.Unmarshal(tmpl, &d))
		f(d)
		out, err := json.Marshal(d)
		require.NoError(t, err)
		return out
	}
	body := edit(func(d map[string]any) {
		d["issue"].(map[string]any)["title"] = "a\u0000b"
		d["comment"].(map[string]any)["body"] = "nul \u0000 here"
	})
	code, doc := b.post(t, forgetest.NewForgejoRequest("/webhooks/forgejo", "issue_comment", "nul-text", testForgejoSecret, body))
	require.Equal(t, http.StatusAccepted, code, "%v", doc)
	m, ev := b.onlyPending(t, forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: 1})
	require.Equal(t, "a\ufffdb", ev.Title)
	m.Title = ev.Title
	require.NoError(t, b.store.Save(context.Background(), m), "the mailbox stays saveable")

	for name, tc := range map[string]struct {
		delivery string
		body     []byte
		reason   string
	}{
		"long delivery id": {strings.Repeat("d", webhook.MaxDeliveryIDBytes+1), edit(func(map[string]any) {}), "delivery id longer"},
		"invalid utf-8 id": {"id-\xff", edit(func(map[string]any) {}), "delivery id is not valid UTF-8"},
		"long repository": {"long-repo", edit(func(d map[string]any) {
			d["repository"].(map[string]any)["full_name"] = "o/" + strings.Repeat("r", 3000)
		}), "repository longer"},
		"nul in repository": {"nul-repo", edit(func(d map[string]any) { d["repository"].(map[string]any)["full_name"] = "o/\u0000" }), "repository is not valid"},
		"nul in login":      {"nul-login", edit(func(d map[string]any) { d["sender"].(map[string]any)["login"] = "x\u0000" }), "sender login"},
	} {
		t.Run(name, func(t *testing.T) {
			code, doc := b.post(t, forgetest.NewForgejoRequest("/webhooks/forgejo", "issue_comment", tc.delivery, testForgejoSecret, tc.body))
			require.Equal(t, http.StatusBadRequest, code, "%v", doc)
			require.Contains(t, doc["error"], tc.reason)
		})
	}
	// A time JSON cannot write (a year before 0 or after 9999 once in UTC) is no time: the
	// event is stored without it, never answered 503 as if Alfred could not store anything.
	for name, tc := range map[string]struct {
		kind, event string
		body        []byte
	}{
		"forgejo, year -1": {"forgejo", "issue_comment", edit(func(d map[string]any) {
			d["comment"].(map[string]any)["updated_at"] = "0000-01-01T00:00:00+01:00"
			d["comment"].(map[string]any)["created_at"] = "0000-01-01T00:00:00+01:00"
			d["issue"].(map[string]any)["updated_at"] = "0000-01-01T00:00:00+01:00"
		})},
		"gitlab, year 10000": {"gitlab", "Issue Hook", func() []byte {
			var d map[string]any
			require.NoError(t, json.Unmarshal(readFixture(t, "gitlab/issue_hook_open.json"), &d))
			d["object_attributes"].(map[string]any)["updated_at"] = "9999-12-31 23:00:00 -0200"
			d["object_attributes"].(map[string]any)["created_at"] = "9999-12-31 23:00:00 -0200"
			out, err := json.Marshal(d)
			require.NoError(t, err)
			return out
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			req := forgetest.NewForgejoRequest("/webhooks/forgejo", tc.event, "time-"+name, testForgejoSecret, tc.body)
			if tc.kind == "gitlab" {
				req = forgetest.NewGitLabRequest("/webhooks/gitlab", tc.event, "time-gitlab", testGitLabToken, tc.body)
			}
			code, doc := b.post(t, req)
			require.Less(t, code, 500, "%v", doc)
		})
	}
	// An event Alfred ignores (a push) with such an id is a bad delivery too: 400, the id not
	// echoed.
	for name, id := range map[string]string{"long delivery id": strings.Repeat("d", webhook.MaxDeliveryIDBytes+1), "invalid utf-8 id": "id-\xff"} {
		t.Run("ignored event, "+name, func(t *testing.T) {
			code, doc := b.post(t, forgetest.NewForgejoRequest("/webhooks/forgejo", "push", id, testForgejoSecret, readFixture(t, "gitea/push.json")))
			require.Equal(t, http.StatusBadRequest, code, "%v", doc)
			require.Contains(t, doc["error"], "delivery id")
			require.NotContains(t, fmt.Sprint(doc), id)
		})
	}
}

// The stored row is bounded by the body: text that JSON escapes to several bytes a character
// ("<" as \u003c) is stored unescaped, and a merge request's description is stored once.
func TestStoreRowBoundedByBody(t *testing.T) {
	b := newStoreBundle(t)
	var mr map[string]any
	require.NoError(t, json.Unmarshal(readFixture(t, "gitlab/merge_request_hook_open.json"), &mr))
	desc := strings.Repeat("<&>", 100_000)
	mr["object_attributes"].(map[string]any)["description"] = desc
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(mr))
	body := []byte(sb.String())
	code, doc := b.post(t, forgetest.NewGitLabRequest("/webhooks/gitlab", "Merge Request Hook", "big-mr", testGitLabToken, body))
	require.Equal(t, http.StatusAccepted, code, "%v", doc)
	var size int
	require.NoError(t, b.store.DB().GetContext(t.Context(), &size, `SELECT octet_length(payload) FROM events WHERE delivery_id = 'big-mr'`))
	require.LessOrEqual(t, size, len(body)+4096, fmt.Sprintf("a %d-byte body became a %d-byte row", len(body), size))
	m, err := b.store.Find(context.Background(), forge.IssueRef{Forge: "gitlab", Repo: mr["project"].(map[string]any)["path_with_namespace"].(string),
		Number: int64(mr["object_attributes"].(map[string]any)["iid"].(float64)), MergeRequest: true})
	require.NoError(t, err)
	evs, err := b.store.PendingEvents(context.Background(), m.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, desc, evs[0].Event.Body)
	require.Equal(t, desc, evs[0].Event.MergeRequest.Body, "the merge request's description is restored")
}
