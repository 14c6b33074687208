package script

import "testing"

// FuzzParse: any script file parses or fails with an error, never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"development:\n  summary: ok\n  files:\n    a.txt: x\n", "analysis.functional:\n  questions: [{id: q1}]\n",
		"", "- a\n- b", "development: {files: {../../etc/passwd: x}}", "x: &a [*a]", "\x00", "development:\n  sleep_seconds: -1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse(data)
	})
}
