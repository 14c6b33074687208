package gitrepo

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

type testBundle struct {
	remote  string // bare "remote" repository path
	mainSHA string
	mgr     *Manager
	proj    Project
}

// run runs git for test setup with a clean identity.
func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// setup makes a bare remote with one commit on main (README) and a Manager over a temp data dir.
func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	root := t.TempDir()
	remote := filepath.Join(root, "remote.git")
	run(t, root, "init", "--quiet", "--bare", "--initial-branch=main", remote)
	seed := filepath.Join(root, "seed")
	run(t, root, "clone", "--quiet", remote, seed)
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644))
	run(t, seed, "add", ".")
	run(t, seed, "commit", "--quiet", "-m", "init")
	run(t, seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(root, "data")
	}
	cfg.AuthorName, cfg.AuthorEmail = "Alfred", "alfred@example.com"
	mgr, err := New(cfg)
	require.NoError(t, err)
	return &testBundle{
		remote:  remote,
		mainSHA: run(t, seed, "rev-parse", "HEAD"),
		mgr:     mgr,
		proj:    Project{Forge: "gitlab", Path: "group/sub/repo", CloneURL: remote, DefaultBranch: "main"},
	}
}

func TestMirrorDir(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	dir, err := b.mgr.MirrorDir(b.proj)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(b.mgr.cfg.DataDir, "mirrors", "gitlab", "group%2Fsub%2Frepo.git"), dir)
	_, err = b.mgr.MirrorDir(Project{Forge: "../x", Path: "a"})
	require.Error(t, err)
	_, err = b.mgr.MirrorDir(Project{Forge: "gitlab", Path: "a/../../b"})
	require.Error(t, err)
}

func TestNewBranchCommitPushReuse(t *testing.T) {
	t.Parallel()
	cfg := Config{}
	if os.Geteuid() == 0 {
		cfg.UID, cfg.GID = 65532, 65532
	}
	b := setup(t, cfg)
	ctx := t.Context()
	branch := "agent/issue-7-add-feature"

	wt, err := b.mgr.AddWorktree(ctx, b.proj, "alfred-mbx1-r1-development-a1", Checkout{Branch: branch})
	require.NoError(t, err)
	require.True(t, wt.NewBranch)
	require.Equal(t, b.mainSHA, wt.Head)
	require.Equal(t, filepath.Join(b.mgr.cfg.DataDir, "worktrees", "alfred-mbx1-r1-development-a1"), wt.Path)
	require.FileExists(t, filepath.Join(wt.Path, "README"))
	if cfg.UID != 0 {
		st, err := os.Stat(filepath.Join(wt.Path, "README"))
		require.NoError(t, err)
		require.EqualValues(t, 65532, st.Sys().(*syscall.Stat_t).Uid)
	}

	// Nothing changed: no commit.
	sha, err := b.mgr.Commit(ctx, wt, "nothing")
	require.NoError(t, err)
	require.Empty(t, sha)

	// Modified, new (untracked, in a new dir) and deleted files are all committed.
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "README"), []byte("changed\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(wt.Path, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "src", "new.go"), []byte("package src\n"), 0o644))
	sha, err = b.mgr.Commit(ctx, wt, "feat: add feature\n\nCloses #7")
	require.NoError(t, err)
	require.Len(t, sha, 40)
	require.Equal(t, "Alfred <alfred@example.com>|Alfred <alfred@example.com>|feat: add feature",
		run(t, wt.Path, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s"))
	require.NoError(t, b.mgr.Push(ctx, wt))
	require.Equal(t, sha, run(t, b.remote, "rev-parse", "refs/heads/"+branch))
	require.NoError(t, b.mgr.RemoveWorktree(ctx, wt))
	require.NoDirExists(t, wt.Path)
	require.NoError(t, b.mgr.RemoveWorktree(ctx, wt), "removing twice")

	// Someone else pushes to the branch; the next run reuses the remote branch as it is now.
	other := filepath.Join(t.TempDir(), "other")
	run(t, "/", "clone", "--quiet", "--branch", branch, b.remote, other)
	require.NoError(t, os.WriteFile(filepath.Join(other, "human.txt"), []byte("h\n"), 0o644))
	run(t, other, "add", ".")
	run(t, other, "commit", "--quiet", "-m", "human")
	run(t, other, "push", "--quiet", "origin", "HEAD")
	humanSHA := run(t, other, "rev-parse", "HEAD")

	wt2, err := b.mgr.AddWorktree(ctx, b.proj, "alfred-mbx1-r2-ci_fix-a1", Checkout{Branch: branch})
	require.NoError(t, err)
	require.False(t, wt2.NewBranch)
	require.Equal(t, humanSHA, wt2.Head)
	require.FileExists(t, filepath.Join(wt2.Path, "src", "new.go"))
	require.FileExists(t, filepath.Join(wt2.Path, "human.txt"))

	// The same branch cannot be checked out twice at once.
	_, err = b.mgr.AddWorktree(ctx, b.proj, "alfred-mbx1-r3-ci_fix-a1", Checkout{Branch: branch})
	require.Error(t, err)
	require.NoError(t, b.mgr.RemoveWorktree(ctx, wt2))
}

func TestDetachedWorktree(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	wt, err := b.mgr.AddWorktree(t.Context(), b.proj, "alfred-mbx2-r1-analysis-a1", Checkout{})
	require.NoError(t, err)
	require.Empty(t, wt.Branch)
	require.Equal(t, b.mainSHA, wt.Head)
	require.Error(t, b.mgr.Push(t.Context(), wt))
	_, err = b.mgr.AddWorktree(t.Context(), b.proj, "x", Checkout{Base: "no-such-branch"})
	require.ErrorContains(t, err, "not found")
	_, err = b.mgr.AddWorktree(t.Context(), b.proj, "../escape", Checkout{})
	require.Error(t, err)
}

// A replaced .git in the worktree (the agent controls the files) must not redirect git.
func TestCommitIgnoresForgedDotGit(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	wt, err := b.mgr.AddWorktree(t.Context(), b.proj, "forged", Checkout{Branch: "agent/issue-9"})
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(wt.Path, ".git")))
	run(t, wt.Path, "init", "--quiet") // a fresh repo in place of the worktree link
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "f.txt"), []byte("x\n"), 0o644))
	sha, err := b.mgr.Commit(t.Context(), wt, "fix")
	require.NoError(t, err)
	require.NotEmpty(t, sha)
	mirror, _ := b.mgr.MirrorDir(b.proj)
	require.Equal(t, sha, run(t, mirror, "rev-parse", "refs/heads/agent/issue-9"))
}

func TestSweep(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := t.Context()
	keep, err := b.mgr.AddWorktree(ctx, b.proj, "keep-me", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	_, err = b.mgr.AddWorktree(ctx, b.proj, "crashed", Checkout{Branch: "agent/issue-2"})
	require.NoError(t, err)
	removed, err := b.mgr.Sweep(ctx, func(name string) bool { return name == "keep-me" })
	require.NoError(t, err)
	require.Equal(t, []string{"crashed"}, removed)
	require.DirExists(t, keep.Path)
	require.NoDirExists(t, b.mgr.WorktreeDir("crashed"))
	mirror, _ := b.mgr.MirrorDir(b.proj)
	list := run(t, mirror, "worktree", "list", "--porcelain")
	require.Contains(t, list, keep.Path)
	require.NotContains(t, list, "crashed")
	// The swept run's branch is free again.
	wt, err := b.mgr.AddWorktree(ctx, b.proj, "again", Checkout{Branch: "agent/issue-2"})
	require.NoError(t, err)
	require.NoError(t, b.mgr.RemoveWorktree(ctx, wt))
}

// TestTokenOnlyInEnvironment serves the remote over smart HTTP (git http-backend behind
// net/http/cgi) and requires Basic auth; the token must reach the server but appear in no URL,
// argv or config file.
func TestTokenOnlyInEnvironment(t *testing.T) {
	t.Parallel()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		out, err := exec.Command("git", "--exec-path").Output()
		require.NoError(t, err)
		backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	}
	const user, token = "alfred-bot", "glpat-SECRET-token-123"
	b := setup(t, Config{Username: user, Token: token})
	run(t, b.remote, "config", "http.receivepack", "true")
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token))

	var mu sync.Mutex
	authed := 0
	cgiH := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(b.remote), "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		authed++
		mu.Unlock()
		cgiH.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	var argv [][]string
	b.mgr.trace = func(args []string) { mu.Lock(); argv = append(argv, args); mu.Unlock() }
	b.proj.CloneURL = srv.URL + "/remote.git"
	ctx := context.Background()
	wt, err := b.mgr.AddWorktree(ctx, b.proj, "auth", Checkout{Branch: "agent/issue-5"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "x"), []byte("x"), 0o644))
	_, err = b.mgr.Commit(ctx, wt, "x")
	require.NoError(t, err)
	require.NoError(t, b.mgr.Push(ctx, wt))
	require.NotEmpty(t, run(t, b.remote, "rev-parse", "refs/heads/agent/issue-5"))
	require.Positive(t, authed)

	cred := base64.StdEncoding.EncodeToString([]byte(user + ":" + token))
	for _, a := range argv {
		require.NotContains(t, strings.Join(a, " "), token)
		require.NotContains(t, strings.Join(a, " "), cred)
	}
	mirror, _ := b.mgr.MirrorDir(b.proj)
	conf, err := os.ReadFile(filepath.Join(mirror, "config"))
	require.NoError(t, err)
	require.NotContains(t, string(conf), token)
	require.NotContains(t, string(conf), cred)
	require.Contains(t, string(conf), srv.URL+"/remote.git")

	// A wrong token fails without leaking the token in the error.
	bad, err := New(Config{DataDir: t.TempDir(), Username: user, Token: "wrong-TOKEN-456"})
	require.NoError(t, err)
	_, err = bad.Sync(ctx, b.proj)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "wrong-TOKEN-456")
}

// TestReplicasShareADataDir: two Managers on one data directory, as two replicas on one
// state claim, clone, fetch and prepare the same project at once. Without the lock file
// beside the mirror the first clones race on its directory and the fetches on its ref locks.
func TestReplicasShareADataDir(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	other, err := New(b.mgr.cfg)
	require.NoError(t, err)
	ctx := t.Context()
	mgrs := []*Manager{b.mgr, other}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			m := mgrs[i%2]
			if i%4 < 2 {
				_, err := m.Sync(ctx, b.proj)
				errs <- err
				return
			}
			wt, err := m.Prepare(ctx, b.proj, fmt.Sprintf("alfred-mbx%d-worktree", i), Checkout{})
			if err == nil {
				require.Equal(t, b.mainSHA, wt.Head)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	dir, err := b.mgr.MirrorDir(b.proj)
	require.NoError(t, err)
	require.FileExists(t, dir+".lock")
}
