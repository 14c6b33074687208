package forgejo

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
	"github.com/alfred-bot/alfred/webhook/internal/fastjson"
)

// BenchmarkParse measures Source.Parse of recorded deliveries next to its baseline, in the same
// run: for each delivery, Parse is the whole parse (headers, decoding, routing to the event),
// go-json the fast decoding alone (github.com/goccy/go-json into the lean types) and
// encoding-json the baseline, encoding/json.Unmarshal of the same body into the same types (what
// Parse spent before the fast decoding). ns/op is go test's, MB/s is of the body. No status
// delivery was recorded, so the status body is built from the comment delivery's repository and
// sender objects, around the fields of Gitea's CommitStatusPayload.
//
//	go test -run '^$' -bench Parse ./webhook/forgejo/
func BenchmarkParse(b *testing.B) {
	cases := []struct{ name, file string }{
		{"issue_comment", "forgejo-live/006-issue_comment-created.json"},
		{"issue_assign", "forgejo-live/002-issue_assign-assigned.json"},
		{"pull_request", "forgejo-live/015-pull_request-opened.json"},
		{"status", ""},
	}
	src, err := NewSource(SourceConfig{Secrets: []string{"bench-secret"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range cases {
		header, body := benchDelivery(b, c.file)
		r := &http.Request{Method: http.MethodPost, Header: header}
		if ev, err := src.Parse(r, body); err != nil || ev.Type == "" {
			b.Fatalf("%s: Parse gave %+v, %v", c.name, ev, err)
		}
		if err := fastjson.Decode(body, new(leanBody)); err != nil {
			b.Fatalf("%s: the fast library refuses the delivery: %v", c.name, err)
		}
		b.Run(c.name+"/Parse", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := src.Parse(r, body); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, d := range benchDecoders {
			b.Run(c.name+"/"+d.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					var l leanBody
					if err := d.decode(body, &l); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchDecoders are the decodings BenchmarkParse measures next to Parse: the fast one and its
// baseline.
var benchDecoders = []struct {
	name   string
	decode func([]byte, any) error
}{{"go-json", fastjson.Decode}, {"encoding-json", json.Unmarshal}}

// benchDelivery returns the headers and body of the recorded delivery file, or, for "", a status
// delivery built from the recorded comment delivery (see BenchmarkParse).
func benchDelivery(b *testing.B, file string) (http.Header, []byte) {
	b.Helper()
	if file != "" {
		header, body, err := recorded.Load(filepath.Join("testdata", file))
		if err != nil {
			b.Fatal(err)
		}
		return header, body
	}
	_, comment, err := recorded.Load(filepath.Join("testdata", "forgejo-live", "006-issue_comment-created.json"))
	if err != nil {
		b.Fatal(err)
	}
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
	return header, body
}
