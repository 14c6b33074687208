package gitrepo

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Canary secrets of the configuration: none has a recognisable format, so only the configured
// list can find them.
const (
	canaryAgentKey = "canary-agent-key-7f3a9c2e5b1d"
	canaryToken    = "canary-forge-token-a81c44e09f"
	canaryWebhook  = "canary-webhook-secret-0c9d2e"
)

// Fake keys in the common formats (none is real).
var formatted = map[string]string{
	"glpat-":      "glpat-Zx8Qp2Lr5Tn7Vb9Wc1Yd",
	"ghp_":        "ghp_" + strings.Repeat("a1B2c3", 6),
	"github_pat_": "github_pat_11ABCDEFG0" + strings.Repeat("x9", 20),
	"sk-ant-":     "sk-ant-api03-" + strings.Repeat("Qw3-", 10),
	"sk-":         "sk-proj-" + strings.Repeat("T3Blbk5J", 5),
	"AKIA":        "AKIAIOSFODNN7EXAMPLE",
	"PRIVATE KEY": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
}

func secretsConfig() Config {
	return Config{Token: canaryToken, Username: "alfred-bot", Secrets: []NamedSecret{
		{Name: "agents[0].api_key", Value: canaryAgentKey},
		{Name: "forges[0].webhook_secret", Value: canaryWebhook},
		{Name: "database_url", Value: "short"}, // under censor.MinLen: not scanned
	}}
}

// pushFiles writes files into a new branch's worktree, commits them as a run does and pushes;
// it returns the push's error and whether the branch reached the remote.
func pushFiles(t *testing.T, b *testBundle, files map[string]string) (error, bool) {
	t.Helper()
	ctx := t.Context()
	branch := "agent/issue-9-leak"
	wt, err := b.mgr.AddWorktree(ctx, b.proj, "alfred-mbx9-r1-development-a1", Checkout{Branch: branch})
	require.NoError(t, err)
	for name, content := range files {
		p := filepath.Join(wt.Path, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	sha, err := b.mgr.Commit(ctx, wt, "Add the export")
	require.NoError(t, err)
	require.NotEmpty(t, sha)
	perr := b.mgr.Push(ctx, wt)
	out := run(t, b.remote, "branch", "--list", branch)
	return perr, out != ""
}

// Hostile: an agent writes the secrets it can see (its API key in a .env, the forge token) or
// keys of common formats into files. The push is refused before anything leaves: the error
// names the file and the kind, never the secret, and the remote has no branch.
func TestHostilePushOfSecretsIsRefused(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		files map[string]string
		where string // the file named in the refusal
		kind  string
	}{
		"agent key in .env":       {files: map[string]string{".env": "ANTHROPIC_API_KEY=" + canaryAgentKey + "\n"}, where: "`.env`", kind: "agents[0].api_key"},
		"forge token in config":   {files: map[string]string{"config/app.yaml": "token: " + canaryToken + "\n"}, where: "`config/app.yaml`", kind: "the forge token"},
		"token in base64":         {files: map[string]string{"deploy/secret.yaml": "data: " + base64.StdEncoding.EncodeToString([]byte(canaryToken)) + "\n"}, where: "`deploy/secret.yaml`", kind: "the forge token"},
		"basic credential":        {files: map[string]string{"ci.sh": "curl -H 'Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("alfred-bot:"+canaryToken)) + "'\n"}, where: "`ci.sh`", kind: "the forge token"},
		"webhook secret":          {files: map[string]string{"hooks.json": `{"secret":"` + canaryWebhook + `"}`}, where: "`hooks.json`", kind: "forges[0].webhook_secret"},
		"in a binary file":        {files: map[string]string{"blob.bin": "\x00\x01\x02" + canaryAgentKey + "\x00\xff"}, where: "`blob.bin`", kind: "agents[0].api_key"},
		"in the file's name":      {files: map[string]string{"keys/" + formatted["glpat-"] + ".txt": "x\n"}, where: "a file whose name holds the secret", kind: "GitLab personal access token"},
		"in an empty file's name": {files: map[string]string{"keys/" + formatted["glpat-"]: ""}, where: "a file whose name holds the secret", kind: "GitLab personal access token"},
		"odd path":                {files: map[string]string{"dir with space/é\t.txt": "k=" + formatted["ghp_"] + "\n"}, where: "`dir with space/é\t.txt`", kind: "GitHub token"},
	}
	for prefix, key := range formatted {
		cases["format "+prefix] = struct {
			files map[string]string
			where string
			kind  string
		}{files: map[string]string{"src/keys.go": "package src\n\nconst key = `" + key + "`\n"}, where: "`src/keys.go`", kind: prefix}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, secretsConfig())
			err, pushed := pushFiles(t, b, tc.files)
			require.ErrorIs(t, err, ErrSecretInPush)
			require.False(t, pushed, "nothing reached the remote")
			var le *LeakError
			require.ErrorAs(t, err, &le)
			require.NotEmpty(t, le.Leaks)
			msg := err.Error()
			require.Contains(t, msg, tc.where)
			require.Contains(t, msg, tc.kind)
			for _, secret := range append([]string{canaryAgentKey, canaryToken, canaryWebhook}, values(formatted)...) {
				first, _, _ := strings.Cut(secret, "\n")
				require.NotContains(t, msg, first, "the refusal never holds the secret")
			}
		})
	}
}

// What is already on the remote, removed lines, words that look like a prefix and secrets too
// short to scan do not stop a push.
func TestPushWithoutNewSecretsGoesThrough(t *testing.T) {
	t.Parallel()
	b := setup(t, secretsConfig())
	// A test fixture with a key is on main already (a human put it there).
	seed := filepath.Join(t.TempDir(), "seed")
	run(t, "/", "clone", "--quiet", b.remote, seed)
	require.NoError(t, os.WriteFile(filepath.Join(seed, "fixture.pem"), []byte(formatted["PRIVATE KEY"]+"\n"), 0o644))
	run(t, seed, "add", ".")
	run(t, seed, "commit", "--quiet", "-m", "fixture")
	run(t, seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	_, err := b.mgr.Sync(t.Context(), b.proj)
	require.NoError(t, err)

	err, pushed := pushFiles(t, b, map[string]string{
		"fixture.pem": "# a test key\n" + formatted["PRIVATE KEY"] + "\n", // a line added above the key
		"ui/list.css": ".task-list-item-checkbox-with-a-rather-long-name-here { }\n",
		"db.txt":      "password: short\n",
		"notes.md":    "Keys look like `sk-...` or `glpat-...`; AKIA is AWS.\n",
	})
	require.NoError(t, err)
	require.True(t, pushed)
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// BenchmarkScanPush measures what the scan adds to a push: ScanPush of one commit adding
// 1 MiB of new lines in 100 files (MB/s), next to the Commit of the same change in the same run
// (the step every push already pays).
func BenchmarkScanPush(b *testing.B) {
	root := b.TempDir()
	remote := filepath.Join(root, "remote.git")
	run(b, root, "init", "--quiet", "--bare", "--initial-branch=main", remote)
	seed := filepath.Join(root, "seed")
	run(b, root, "clone", "--quiet", remote, seed)
	require.NoError(b, os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644))
	run(b, seed, "add", ".")
	run(b, seed, "commit", "--quiet", "-m", "init")
	run(b, seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	cfg := secretsConfig()
	cfg.DataDir, cfg.AuthorName, cfg.AuthorEmail = filepath.Join(root, "data"), "Alfred", "a@example.com"
	mgr, err := New(cfg)
	require.NoError(b, err)
	p := Project{Forge: "gitlab", Path: "bench/scan", CloneURL: remote, DefaultBranch: "main"}
	line := strings.Repeat("func handler(w http.ResponseWriter, r *http.Request) { /* body */ }\n", 1)
	content := strings.Repeat(line, (10<<10)/len(line)+1)
	const files = 100
	n := 0
	change := func() *Worktree {
		n++
		wt, err := mgr.AddWorktree(b.Context(), p, fmt.Sprintf("alfred-mbx%d-r1-development-a1", n), Checkout{Branch: fmt.Sprintf("agent/bench-%d", n)})
		require.NoError(b, err)
		for i := range files {
			require.NoError(b, os.WriteFile(filepath.Join(wt.Path, fmt.Sprintf("f%03d.go", i)), []byte(fmt.Sprintf("// %d\n%s", n, content)), 0o644))
		}
		return wt
	}
	b.Run("commit", func(b *testing.B) {
		b.SetBytes(int64(files * len(content)))
		for b.Loop() {
			b.StopTimer()
			wt := change()
			b.StartTimer()
			_, err := mgr.Commit(b.Context(), wt, "bench")
			require.NoError(b, err)
		}
	})
	// A push of 20 small commits: what reading each commit's message costs.
	b.Run("scan-20-commits", func(b *testing.B) {
		b.StopTimer()
		n++
		wt, err := mgr.AddWorktree(b.Context(), p, fmt.Sprintf("alfred-mbx%d-r1-development-a1", n), Checkout{Branch: fmt.Sprintf("agent/bench-%d", n)})
		require.NoError(b, err)
		for i := range 20 {
			require.NoError(b, os.WriteFile(filepath.Join(wt.Path, fmt.Sprintf("c%02d.go", i)), []byte(line), 0o644))
			_, err := mgr.Commit(b.Context(), wt, fmt.Sprintf("Step %d", i))
			require.NoError(b, err)
		}
		b.StartTimer()
		for b.Loop() {
			leaks, err := mgr.ScanPush(b.Context(), wt)
			require.NoError(b, err)
			require.Empty(b, leaks)
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.StopTimer()
		wt := change()
		_, err := mgr.Commit(b.Context(), wt, "bench")
		require.NoError(b, err)
		b.StartTimer()
		b.SetBytes(int64(files * len(content)))
		for b.Loop() {
			leaks, err := mgr.ScanPush(b.Context(), wt)
			require.NoError(b, err)
			require.Empty(b, leaks)
		}
	})
}

// A merge of the target branch brings in what a human pushed there (a key in a test fixture,
// in a conflicted file and in a clean one): that is on the remote already and does not refuse
// the push. A resolution that adds a key of its own is refused.
func TestPushOfAMergeScansOnlyWhatItAdds(t *testing.T) {
	t.Parallel()
	for name, extra := range map[string]string{"taken from the parents": "", "a key of its own": formatted["sk-ant-"]} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, secretsConfig())
			work := filepath.Join(t.TempDir(), "work")
			run(t, filepath.Dir(work), "clone", "--quiet", b.remote, work)
			run(t, work, "checkout", "--quiet", "-b", "agent/x")
			require.NoError(t, os.WriteFile(filepath.Join(work, "README"), []byte("hello agent\n"), 0o644))
			run(t, work, "commit", "--quiet", "-am", "Agent: greet")
			run(t, work, "push", "--quiet", "origin", "agent/x")
			run(t, work, "checkout", "--quiet", "main")
			require.NoError(t, os.WriteFile(filepath.Join(work, "README"), []byte("hello main\nfixture "+formatted["glpat-"]+"\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(work, "test.pem"), []byte(formatted["PRIVATE KEY"]+"\n"), 0o644))
			run(t, work, "add", ".")
			run(t, work, "commit", "--quiet", "-m", "Main: fixtures")
			run(t, work, "push", "--quiet", "origin", "main")
			wt, err := b.mgr.AddWorktree(t.Context(), b.proj, "mbx1-conflict_resolution-a1", Checkout{Branch: "agent/x"})
			require.NoError(t, err)

			m, err := b.mgr.MergeTarget(t.Context(), b.proj, wt, "main", "Merge branch 'main' into agent/x")
			require.NoError(t, err)
			require.Equal(t, []string{"README"}, m.Conflicts)
			resolved := "hello agent and main\nfixture " + formatted["glpat-"] + "\n"
			if extra != "" {
				resolved += "key " + extra + "\n"
			}
			require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "README"), []byte(resolved), 0o644))
			_, err = b.mgr.CommitMerge(t.Context(), wt, m.Conflicts, "Merge branch 'main' into agent/x")
			require.NoError(t, err)
			err = b.mgr.Push(t.Context(), wt)
			if extra == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrSecretInPush)
			require.ErrorContains(t, err, "`README` (an Anthropic API key")
			require.NotContains(t, err.Error(), "GitLab", "main's fixture is not the merge's")
		})
	}
}

// A secret in a commit message is found in the commit that has it, among several commits
// about to be pushed, in their order; the other commits' messages are clean.
func TestScanPushReadsEveryCommitMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, secretsConfig())
	ctx := t.Context()
	wt, err := b.mgr.AddWorktree(ctx, b.proj, "alfred-mbx9-r1-development-a1", Checkout{Branch: "agent/issue-9-messages"})
	require.NoError(t, err)
	messages := []string{"Add the export", "Use the key " + canaryAgentKey + "\n\nas configured", "Clean up",
		"Add the token\n\n" + formatted["ghp_"]}
	var shas []string
	for i, msg := range messages {
		require.NoError(t, os.WriteFile(filepath.Join(wt.Path, fmt.Sprintf("f%d.txt", i)), []byte("x\n"), 0o644))
		sha, err := b.mgr.Commit(ctx, wt, msg)
		require.NoError(t, err)
		shas = append(shas, sha)
	}
	leaks, err := b.mgr.ScanPush(ctx, wt)
	require.NoError(t, err)
	require.Equal(t, []Leak{{Commit: shas[1], Kind: "the value of agents[0].api_key"},
		{Commit: shas[3], Kind: "a GitHub token (ghp_…)"}}, leaks)
}

// Hostile: a run commits a huge file, one line long, with the webhook secret across the end
// of the first piece the scan searches and the agent's key at the file's very end. Both are
// found, and the scan's memory stays bounded by its pieces, not by the file: before the patch
// was read in pieces, a 32 MB file cost ten times its size in allocations.
//
// Not parallel: the bound is read from the process's allocation counter, which the package's
// parallel tests would add to.
func TestScanPushOfAHugeFileIsBoundedAndFindsEveryKey(t *testing.T) {
	b := setup(t, secretsConfig())
	ctx := t.Context()
	wt, err := b.mgr.AddWorktree(ctx, b.proj, "alfred-mbx9-r1-development-a1", Checkout{Branch: "agent/issue-9-huge"})
	require.NoError(t, err)
	const size = 32 << 20
	filler := func(n int) string { return strings.Repeat("0123456789abcdef", n/16+1)[:n] }
	// The line is read in pieces of patchLineMax (the first one starts with the patch's "+"),
	// and searched once scanChunk bytes of it are held: the first search ends after the
	// fragment that reaches scanChunk.
	firstEnd := (scanChunk/patchLineMax+1)*patchLineMax - 1
	huge := filler(firstEnd-10) + canaryWebhook
	huge += filler(size-len(huge)-len(canaryAgentKey)) + canaryAgentKey
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "huge.min.js"), []byte(huge), 0o644))
	sha, err := b.mgr.Commit(ctx, wt, "Add the bundle")
	require.NoError(t, err)
	huge = ""

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	leaks, err := b.mgr.ScanPush(ctx, wt)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.ElementsMatch(t, []Leak{{Commit: sha, Path: "huge.min.js", Kind: "the value of forges[0].webhook_secret"},
		{Commit: sha, Path: "huge.min.js", Kind: "the value of agents[0].api_key"}}, leaks)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("ScanPush of a %d MiB file allocated %.1f MiB", size>>20, float64(allocated)/(1<<20))
	// About 8 MiB for a 32 or a 64 MB file: the pieces, the buffers and the censored pieces'
	// copies.
	require.Less(t, allocated, uint64(16<<20), "allocations bounded by the scan's pieces, not the file")
}
