//go:build realcli

package realcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest/mockmodel"
	"github.com/alfred-bot/alfred/runner/agent/internal/clitest"
)

// realCLIs is how many CLIs the package runs (one Test function each): each gets an equal share
// of what is left of the package's -timeout, so a CLI that hangs fails its own test and the
// others still run.
const realCLIs = 5

// minCLIShare is the least time one CLI's test may be given: a version, a fresh run and two
// resumes took up to 81 s each on a loaded 2-core machine. A package -timeout below
// realCLIs × minCLIShare is refused at once (go test's default of 10 minutes is).
const minCLIShare = 8 * time.Minute

// clisStarted counts the CLI tests begun so far (they run one after another).
var clisStarted int

// TestMain refuses a package -timeout too short for every CLI to run (only when the CLIs are
// installed: without ALFRED_REALCLI_DIR every test skips).
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("ALFRED_REALCLI_DIR") != "" {
		if err := checkPackageTimeout(flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration)); err != nil {
			fmt.Fprintln(os.Stderr, "realcli:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// checkPackageTimeout says why d (go test's -timeout, 0 for none) cannot give every CLI its
// minimum share, or nil.
func checkPackageTimeout(d time.Duration) error {
	if need := realCLIs * minCLIShare; d != 0 && d < need {
		return fmt.Errorf("the package -timeout %s is below %d CLIs × %s = %s: run make realcli-test (REALCLI_TIMEOUT) or pass -timeout %s", d, realCLIs, minCLIShare, need, need)
	}
	return nil
}

// cliContext is the limit of the CLI test t: an equal share of what is left of the package's
// deadline among the CLIs not yet begun, less a minute for the test binary to report. The
// runs wait on the CLI's exit within it; none has a wall-clock limit of its own
// (spec/agents.md "General rules").
func cliContext(t *testing.T) context.Context {
	t.Helper()
	left := realCLIs - clisStarted
	clisStarted++
	deadline, ok := t.Deadline()
	if !ok || left < 1 {
		return context.Background()
	}
	share := (time.Until(deadline) - time.Minute) / time.Duration(left)
	ctx, cancel := context.WithTimeout(context.Background(), share)
	t.Cleanup(cancel)
	t.Logf("this CLI's share of the package -timeout: %s", share.Round(time.Second))
	return ctx
}

// cliBin returns the npm-installed binary name under $ALFRED_REALCLI_DIR (an npm --prefix
// dir), skipping the test loudly when the variable is unset.
func cliBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("ALFRED_REALCLI_DIR")
	if dir == "" {
		fmt.Fprintf(os.Stderr, "realcli: SKIPPING %s: ALFRED_REALCLI_DIR is unset (make realcli-test installs the CLIs and sets it)\n", t.Name())
		t.Skip("ALFRED_REALCLI_DIR is unset: run `make realcli-test`, or install the CLIs with npm install --prefix DIR and set ALFRED_REALCLI_DIR=DIR")
	}
	bin, err := filepath.Abs(filepath.Join(dir, "node_modules", ".bin", name))
	require.NoError(t, err)
	_, err = os.Stat(bin)
	require.NoError(t, err, "%s not installed under ALFRED_REALCLI_DIR", name)
	return bin
}

// npmVersion reads the installed version of an npm package under $ALFRED_REALCLI_DIR.
func npmVersion(t *testing.T, pkg string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(os.Getenv("ALFRED_REALCLI_DIR"), "node_modules", pkg, "package.json"))
	require.NoError(t, err)
	var p struct{ Version string }
	require.NoError(t, json.Unmarshal(b, &p))
	return pkg + "@" + p.Version
}

// host is where the CLIs run: a temp HOME, a temp git worktree as cwd, the mock model, and the
// CLI's limit.
type host struct {
	home, work string
	mock       *mockmodel.Server
	ctx        context.Context // the CLI's limit (cliContext)
}

func newHost(t *testing.T) *host {
	t.Helper()
	h := &host{home: t.TempDir(), work: t.TempDir(), mock: mockmodel.New(t), ctx: cliContext(t)}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=Alfred", "-c", "user.email=alfred@example.invalid", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = h.work
		cmd.Env = append(os.Environ(), "HOME="+h.home)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	require.NoError(t, os.WriteFile(filepath.Join(h.work, "README.md"), []byte("# app\n"), 0o644))
	return h
}

// run executes inv with bin in place of Cmd[0]: cwd the worktree, stdin /dev/null, env only
// PATH (the codex launcher is a node script), HOME, inv.Env and extra.
func (h *host) run(t *testing.T, bin string, inv runner.Invocation, extra ...string) (stdout, stderr []byte, exit runner.ExitState) {
	t.Helper()
	ctx := h.ctx
	cmd := exec.CommandContext(ctx, bin, inv.Cmd[1:]...)
	cmd.Dir = h.work
	cmd.Env = append(append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + h.home}, inv.Env...), extra...)
	cmd.Stdin = nil // /dev/null
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		exit = runner.ExitState{Code: -1, Killed: true}
	case errors.As(err, &ee):
		exit.Code = ee.ExitCode()
	default:
		require.NoError(t, err)
	}
	t.Logf("%s %s: exit %d in %s; %d stdout bytes; stderr:\n%s", filepath.Base(bin), strings.Join(redactPrompt(inv.Cmd[1:]), " "),
		exit.Code, time.Since(start).Round(time.Millisecond), out.Len(), errb.String())
	require.False(t, exit.Killed, "the CLI ran over its share of the package -timeout (raise REALCLI_TIMEOUT)")
	return out.Bytes(), errb.Bytes(), exit
}

// version runs the adapter's version command with bin.
func (h *host) version(t *testing.T, bin string, cmd []string, parse func(string) (string, error)) string {
	t.Helper()
	stdout, stderr, exit := h.run(t, bin, runner.Invocation{Cmd: cmd})
	require.Equal(t, 0, exit.Code, string(stderr))
	v, err := parse(string(stdout))
	require.NoError(t, err)
	return v
}

// logRequests shows what the CLI asked of the mock.
func (h *host) logRequests(t *testing.T) {
	t.Helper()
	for _, r := range h.mock.Requests() {
		t.Logf("mock: %s %s → %d (%d bytes; marks %v)", r.Method, r.Path, r.Status, len(r.Body), mockmodel.Marks(r.Body))
	}
	h.mock.Reset()
}

// sanitize replaces the run's temp paths and the mock's port with stable placeholders.
func (h *host) sanitize(b []byte) []byte {
	s := string(b)
	for old, repl := range map[string]string{h.work: "/workspace", h.home: "/alfred/home",
		slug(h.work): slug("/workspace"), h.mock.URL: "http://127.0.0.1:MOCK"} {
		s = strings.ReplaceAll(s, old, repl)
	}
	return []byte(s)
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// slug is Claude Code's project dir name for a cwd (spec/agents.md §1 Sessions).
func slug(dir string) string { return nonAlnum.ReplaceAllString(dir, "-") }

// record writes the run under -update: dir/real_<version>_<run>.jsonl (sanitized stdout) and
// .meta.json (m.Version must be set).
// It returns the sanitized stdout and the Meta that the checks then read, exactly as the
// untagged tests read the recorded files.
func (h *host) record(t *testing.T, dir, run string, m Meta, inv runner.Invocation, stdout, stderr []byte, exit runner.ExitState) ([]byte, Meta) {
	t.Helper()
	stdout = h.sanitize(stdout)
	m.Cmd = append([]string(nil), inv.Cmd...)
	m.Env = make([]string, len(inv.Env))
	for i, e := range inv.Env {
		m.Env[i] = string(h.sanitize([]byte(e)))
	}
	for i, a := range m.Cmd {
		m.Cmd[i] = string(h.sanitize([]byte(a)))
	}
	m.ExitCode = exit.Code
	m.Stderr = string(h.sanitize(stderr))
	if *clitest.Update {
		require.NoError(t, os.WriteFile(filepath.Join(dir, recordName(m.Version, run)+".jsonl"), stdout, 0o644))
		b, err := json.MarshalIndent(m, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, recordName(m.Version, run)+".meta.json"), append(b, '\n'), 0o644))
	}
	return stdout, m
}

func redactPrompt(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 80 {
			a = a[:40] + "…(" + fmt.Sprint(len(a)) + " bytes)"
		}
		out[i] = strings.ReplaceAll(a, "\n", " ")
	}
	return out
}
