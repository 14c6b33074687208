package gitlab

import (
	"encoding/json"
	"path/filepath"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/internal/fastjson"
)

// BenchmarkParse runs forgetest.BenchParse on recorded GitLab deliveries (a note on an issue, an
// opened issue, an opened merge request, a pipeline): Parse next to github.com/goccy/go-json
// (go-json) and encoding/json (encoding-json) decoding the body into the envelope and client-go's
// event type, the two values Parse decodes, encoding/json being what Parse spent before.
//
//	go test -run '^$' -bench Parse ./webhook/gitlab/
func BenchmarkParse(b *testing.B) {
	src, err := NewSource(SourceConfig{Tokens: []string{"bench-token"}})
	if err != nil {
		b.Fatal(err)
	}
	recordedCase := func(name, file, event string) forgetest.ParseBenchCase {
		return forgetest.RecordedParseBenchCase(b, name, filepath.Join("testdata", file), "X-Gitlab-Event", event)
	}
	forgetest.BenchParse(b, src.Parse, []forgetest.ParseBenchCase{
		recordedCase("note_issue", "note_hook_issue.json", "Note Hook"),
		recordedCase("issue_open", "issue_hook_open.json", "Issue Hook"),
		recordedCase("merge_request_open", "merge_request_hook_open.json", "Merge Request Hook"),
		recordedCase("pipeline", "pipeline_hook_success.json", "Pipeline Hook"),
	}, []forgetest.ParseBenchDecoder{
		{Name: "go-json", Decode: benchDecode(fastjson.Decode)},
		{Name: "encoding-json", Decode: benchDecode(json.Unmarshal)},
	})
}

// benchDecode returns a decoding of a body with decode into what Parse decodes it into: the
// envelope, then the event type its object_kind (and a note's noteable_type) names.
func benchDecode(decode func([]byte, any) error) func([]byte) error {
	return func(body []byte) error {
		var env hookEnvelope
		if err := decode(body, &env); err != nil {
			return err
		}
		var event any
		switch env.ObjectKind {
		case "issue":
			event = new(gl.IssueEvent)
		case "note":
			event = new(gl.MergeCommentEvent)
			if env.ObjectAttributes.NoteableType == "Issue" {
				event = new(gl.IssueCommentEvent)
			}
		case "merge_request":
			event = new(gl.MergeEvent)
		default:
			event = new(gl.PipelineEvent)
		}
		return decode(body, event)
	}
}
