package forgetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// FixtureDir returns the directory that holds kind's recorded deliveries in this module's source
// tree, so that tests of any package read the fixtures where the forge package keeps them:
// webhook/gitlab/testdata for forge.KindGitLab, and webhook/forgejo/testdata (with the sets
// gitea/, gitea-live/ and forgejo-live/) for forge.KindForgejo. The module root is the nearest
// directory above the working directory (the package's own directory under go test) that holds
// go.mod. It fails t when there is none or kind is not valid.
func FixtureDir(t testing.TB, kind forge.Kind) string {
	t.Helper()
	pkg, ok := map[forge.Kind]string{forge.KindGitLab: "gitlab", forge.KindForgejo: "forgejo"}[kind]
	if !ok {
		t.Fatalf("forgetest: no fixtures for forge kind %q", kind)
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("forgetest: locating fixtures: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "webhook", pkg, "testdata")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("forgetest: locating fixtures: no go.mod above the working directory")
		}
		dir = parent
	}
}
