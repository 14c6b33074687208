package runner_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runGit runs the host's git with args and returns its trimmed output; a failure fails t.
func runGit(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", args...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// seedRemote creates the bare repository dir/repo.git whose main holds files (by path; an
// empty commit when there are none) and returns its path: the remote of a test's project.
func seedRemote(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	bare, seed := filepath.Join(dir, "repo.git"), filepath.Join(dir, "seed")
	runGit(t, "init", "--quiet", "--bare", "-b", "main", bare)
	runGit(t, "init", "--quiet", "-b", "main", seed)
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(seed, name), []byte(content), 0o644))
	}
	runGit(t, "-C", seed, "add", ".")
	runGit(t, "-C", seed, "-c", "user.name=s", "-c", "user.email=s@example.org", "commit", "--quiet", "--allow-empty", "-m", "init")
	runGit(t, "-C", seed, "push", "--quiet", bare, "main")
	return bare
}
