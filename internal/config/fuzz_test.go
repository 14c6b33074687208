package config

import (
	"os"
	"testing"
)

// FuzzLoad: any configuration file loads or fails with an error, never panics.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("../../deploy/alfred.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{minimalYAML, string(example), "", "listen: [", "forges: {a: b}", "http: {read_timeout: 1e9h}", "\x00"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, yml string) {
		_, _ = Load(writeFile(t, dir, "alfred.yaml", yml), nil)
	})
}
