package forgejo

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/fastjson"
)

// recordedPayloads returns the path of every recorded payload in testdata (Forgejo and Gitea).
func recordedPayloads(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no recorded payloads: %v", err)
	}
	return files
}

// TestLeanDecodingMatchesLenient decodes every recorded payload all three ways: where the lean
// types accept a payload they must yield what the lenient types yield, the fast library must
// accept it too with the same lean value, and the lean types must accept the recorded Forgejo and
// Gitea deliveries (else the fast path is never taken).
func TestLeanDecodingMatchesLenient(t *testing.T) {
	files := recordedPayloads(t)
	lean := 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want hookBody
		wantErr := json.Unmarshal(body, &want)
		var l leanBody
		if json.Unmarshal(body, &l) != nil {
			continue
		}
		lean++
		if wantErr != nil {
			t.Errorf("%s: lean decoding accepted what the lenient one refused (%v)", f, wantErr)
			continue
		}
		var got hookBody
		l.into(&got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: lean decoding\n%+v\nlenient decoding\n%+v", f, got, want)
		}
		var fast leanBody
		if err := fastjson.Decode(body, &fast); err != nil {
			t.Errorf("%s: the fast library refused what encoding/json decodes: %v", f, err)
		} else if !reflect.DeepEqual(fast, l) {
			t.Errorf("%s: fast decoding\n%+v\nencoding/json\n%+v", f, fast, l)
		}
	}
	if lean < len(files)/2 {
		t.Errorf("lean decoding accepted %d of %d recorded payloads", lean, len(files))
	}
}

// TestLeanDecodingFallsBack checks that a payload of an unusual shape (bare-string users and
// labels, a time that is not a string) is refused by the fast library and decoded by the lenient
// types.
func TestLeanDecodingFallsBack(t *testing.T) {
	body := []byte(`{"action":"opened","sender":"alice","issue":{"number":3,"user":"bob",` +
		`"labels":["bug"],"assignees":null,"updated_at":12},"repository":{"full_name":"o/r"}}`)
	var l leanBody
	if err := fastjson.Decode(body, &l); err == nil {
		t.Fatalf("the fast library accepted bare-string users: %+v", l)
	}
	var p hookBody
	if err := decodeHook(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Sender.Login != "alice" || p.Issue.User.Login != "bob" || !p.Issue.Assignees.Present ||
		len(p.Issue.Labels.Items) != 1 || p.Issue.Labels.Items[0].Name != "bug" {
		t.Errorf("decoded %+v, issue %+v", p, p.Issue)
	}
}

// fuzzHeaders are the event names the fuzz target routes each decoded payload under: one of each
// route in routeHook.
var fuzzHeaders = []string{"issues", "issue_assign", "issue_label", "issue_comment",
	"pull_request_comment", "pull_request", "pull_request_assign", "pull_request_review_approved",
	"pull_request_review_rejected", "status"}

// FuzzFastDecode is the differential test of the fast path: whenever github.com/goccy/go-json
// decodes a payload into the lean types without error (and without a panic, which fastjson.Decode
// recovers), encoding/json must decode the same bytes into the same lean value without error,
// and the events routed from both under every event name must be equal. Seeds: every recorded
// payload in testdata, and payloads of unusual shapes.
func FuzzFastDecode(f *testing.F) {
	for _, file := range recordedPayloads(f) {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	for _, s := range []string{
		`{"sender":"alice","issue":{"user":"bob","labels":["bug"]}}`,
		`{"sender":{"login":"a"},"sender":{"id":1},"Sender":{"USERNAME":"u"}}`,
		`{"issue":{"number":1,"labels":null,"assignees":[],"assignee":null,"updated_at":5}}`,
		`{"issue":{"labels":{},"assignees":"x"},"number":1e2,"id":-0,"is_pull":null}`,
		`{"pull_request":{"number":9223372036854775807,"merged":true,"head":{"ref":"\u00e9\ud800"}}}`,
		"{\"action\":\"\xff\xfe\",\"comment\":{\"body\":\"a\\u0000b\",\"created_at\":\"2026-01-02T03:04:05Z\"}}",
		`{"state":"success","sha":"abc","repository":{"full_name":"o/r"}} trailing`,
		`{"review":{"type":"pull_request_review_approved","content":"ok"},"pull_request":{"number":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast leanBody
		err := fastjson.Decode(body, &fast)
		if p := (*fastjson.PanicError)(nil); errors.As(err, &p) {
			t.Fatalf("the fast library panicked (recovered): %v", p.Value)
		}
		if err != nil {
			return // refused: encoding/json decides, as before
		}
		var std leanBody
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatalf("the fast library accepted what encoding/json refuses: %v", err)
		}
		require.Equal(t, std, fast, "fast decoding (actual) against encoding/json (expected)")
		var pf, ps hookBody
		fast.into(&pf)
		std.into(&ps)
		for _, name := range fuzzHeaders {
			ev := forge.Event{Kind: forge.KindForgejo, Header: name}
			evF, errF := routeHook(ev, &pf, true)
			evS, errS := routeHook(ev, &ps, true)
			require.Equal(t, evS, evF, "%s: event of the fast path (actual) against encoding/json (expected)", name)
			require.Equal(t, errString(errS), errString(errF), "%s: error of the fast path", name)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
