package gitlab

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/internal/fastjson"
)

// recordedPayloads returns the body of every recorded GitLab delivery in testdata.
func recordedPayloads(tb testing.TB) map[string][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	more, err2 := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil || err2 != nil || len(files) == 0 {
		tb.Fatalf("no recorded payloads: %v %v", err, err2)
	}
	out := map[string][]byte{}
	for _, f := range append(files, more...) {
		body, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out[f] = body
	}
	return out
}

// sameDecoding checks the fast path of hookDecode for one type T: when github.com/goccy/go-json
// decodes body into a T without error, encoding/json decodes the same bytes into the same T
// without error. A panic counts as a refusal once fastjson.Decode has recovered it: client-go's
// own UnmarshalJSON methods panic on some values (PipelineEventObjectAttributes on null, under
// either library; the seed corpus in testdata/fuzz holds one). It returns whether the fast
// library accepted body.
func sameDecoding[T any](t *testing.T, body []byte) bool {
	t.Helper()
	var fast T
	err := fastjson.Decode(body, &fast)
	if p := (*fastjson.PanicError)(nil); errors.As(err, &p) {
		t.Logf("decoding a %T panicked, recovered: %v", fast, p.Value)
	}
	if err != nil {
		return false // refused: encoding/json decides, as before
	}
	var std T
	if err := json.Unmarshal(body, &std); err != nil {
		t.Fatalf("the fast library accepted a %T that encoding/json refuses: %v", fast, err)
	}
	require.Equal(t, std, fast, "%T: fast decoding (actual) against encoding/json (expected)", fast)
	return true
}

// sameDecodings runs sameDecoding for every type Parse decodes a body into, and returns how many
// of them the fast library accepted.
func sameDecodings(t *testing.T, body []byte) int {
	t.Helper()
	n := 0
	for _, ok := range []bool{
		sameDecoding[hookEnvelope](t, body), sameDecoding[gl.IssueEvent](t, body),
		sameDecoding[gl.IssueCommentEvent](t, body), sameDecoding[gl.MergeCommentEvent](t, body),
		sameDecoding[gl.MergeEvent](t, body), sameDecoding[gl.PipelineEvent](t, body),
	} {
		if ok {
			n++
		}
	}
	return n
}

// TestFastDecodingOfRecordedDeliveries checks the fast path on every recorded delivery, and that
// it is taken: the fast library must decode the envelope of each.
func TestFastDecodingOfRecordedDeliveries(t *testing.T) {
	for f, body := range recordedPayloads(t) {
		if !sameDecoding[hookEnvelope](t, body) {
			t.Errorf("%s: the fast library refuses the envelope", f)
		}
		sameDecodings(t, body)
	}
}

// FuzzFastDecode is the differential test of hookDecode's fast path: for each type Parse decodes
// a body into (the envelope and client-go's issue, note, merge request and pipeline events),
// whenever github.com/goccy/go-json decodes the body without error or panic, encoding/json must
// decode the same bytes into the same value without error (sameDecoding). Parse builds the event
// from these values alone (and from the changes' keys, read with encoding/json), so both paths
// give the same event. Seeds: every recorded GitLab delivery in testdata.
func FuzzFastDecode(f *testing.F) {
	for _, body := range recordedPayloads(f) {
		f.Add(body)
	}
	f.Add([]byte(`{"object_kind":"note","user":{"id":"1"},"object_attributes":{"noteable_type":"Issue"}}`))
	f.Add([]byte(`{"object_kind":"issue","OBJECT_ATTRIBUTES":{"iid":1e0},"labels":null,"assignees":[]}`))
	f.Add([]byte(`{"object_kind":"pipeline","object_attributes":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sameDecodings(t, body)
	})
}
