package clikit

import "testing"

// FuzzLinesAndJSONObject: any CLI output splits into lines and any final text yields a JSON
// object or none, never a panic; a found object is valid JSON.
func FuzzLinesAndJSONObject(f *testing.F) {
	for _, s := range []string{"", "{\"type\":\"x\"}\n", "text {\"summary\":\"ok\"} more", "```json\n{\"a\":1}\n```", "{{{", "\x00{"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		Lines(out, func(string, []byte) {})
		obj, ok := JSONObject(string(out))
		if ok && len(obj) == 0 {
			t.Fatal("found an empty object")
		}
	})
}
