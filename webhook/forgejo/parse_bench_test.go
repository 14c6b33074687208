package forgejo

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/internal/fastjson"
)

// BenchmarkParse runs forgetest.BenchParse on recorded Forgejo deliveries (a comment, an
// assignment, a pull request) and on a status delivery built from the comment's repository and
// sender objects around the fields of Gitea's CommitStatusPayload (no status delivery was
// recorded): Parse next to github.com/goccy/go-json (go-json) and encoding/json (encoding-json)
// decoding the body into the lean types, encoding/json being what Parse spent before.
//
//	go test -run '^$' -bench Parse ./webhook/forgejo/
func BenchmarkParse(b *testing.B) {
	src, err := NewSource(SourceConfig{Secrets: []string{"bench-secret"}})
	if err != nil {
		b.Fatal(err)
	}
	live := filepath.Join("testdata", "forgejo-live")
	comment := forgetest.RecordedParseBenchCase(b, "issue_comment", filepath.Join(live, "006-issue_comment-created.json"))
	forgetest.BenchParse(b, src.Parse, []forgetest.ParseBenchCase{
		comment,
		forgetest.RecordedParseBenchCase(b, "issue_assign", filepath.Join(live, "002-issue_assign-assigned.json")),
		forgetest.RecordedParseBenchCase(b, "pull_request", filepath.Join(live, "015-pull_request-opened.json")),
		benchStatus(b, comment.Body),
	}, []forgetest.ParseBenchDecoder{
		{Name: "go-json", Decode: func(body []byte) error { return fastjson.Decode(body, new(leanBody)) }},
		{Name: "encoding-json", Decode: func(body []byte) error { return json.Unmarshal(body, new(leanBody)) }},
	})
}

// benchStatus returns a status delivery with the repository and sender objects of comment, a
// recorded delivery's body.
func benchStatus(b *testing.B, comment []byte) forgetest.ParseBenchCase {
	b.Helper()
	var parts struct{ Repository, Sender json.RawMessage }
	if err := json.Unmarshal(comment, &parts); err != nil {
		b.Fatal(err)
	}
	sha := strings.Repeat("0123456789abcdef", 2) + "01234567"
	body, err := json.MarshalIndent(map[string]any{
		"id": 7, "sha": sha, "context": "ci/build", "state": "success", "description": "build passed",
		"target_url": "http://127.0.0.1:3400/acceptance/sandbox/actions/runs/7",
		"created_at": "2026-11-29T09:20:00Z", "updated_at": "2026-11-29T09:21:00Z",
		"repository": parts.Repository, "sender": parts.Sender,
	}, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set(hookHeaderForgejoEventType, "status")
	return forgetest.ParseBenchCase{Name: "status", Header: header, Body: body}
}
