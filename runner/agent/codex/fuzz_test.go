package codex

import "testing"

// FuzzParseStream: any stdout the CLI prints parses into a stream, never panics.
func FuzzParseStream(f *testing.F) {
	for _, s := range []string{"", "{}", "not json\n{\"type\":\"result\"}\n", "{\"type\":\"\x00\"}\n", "[1,2]\n{\"type\":null}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		if ParseStream(stdout) == nil {
			t.Fatal("nil stream")
		}
	})
}
