package forgejo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestLeanDecodingMatchesLenient decodes every recorded payload both ways: where the lean types
// accept a payload they must yield what the lenient types yield, and they must accept the
// recorded Forgejo and Gitea deliveries (else the fast path is never taken).
func TestLeanDecodingMatchesLenient(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded payloads: %v", err)
	}
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
	}
	if lean < len(files)/2 {
		t.Errorf("lean decoding accepted %d of %d recorded payloads", lean, len(files))
	}
}

// TestLeanDecodingFallsBack checks that a payload of an unusual shape (bare-string users and
// labels, a time that is not a string) is decoded by the lenient types.
func TestLeanDecodingFallsBack(t *testing.T) {
	body := []byte(`{"action":"opened","sender":"alice","issue":{"number":3,"user":"bob",` +
		`"labels":["bug"],"assignees":null,"updated_at":12},"repository":{"full_name":"o/r"}}`)
	var p hookBody
	if err := decodeHook(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Sender.Login != "alice" || p.Issue.User.Login != "bob" || !p.Issue.Assignees.Present ||
		len(p.Issue.Labels.Items) != 1 || p.Issue.Labels.Items[0].Name != "bug" {
		t.Errorf("decoded %+v, issue %+v", p, p.Issue)
	}
}
