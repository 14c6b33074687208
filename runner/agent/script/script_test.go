package script_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/phase"
)

const sample = `
analysis.functional:
  summary: Understood.
  understanding: The login page must accept SSO.
  questions:
    - id: q1
      title: Which provider?
      options: [{id: a, label: GitLab}, {id: b, label: Forgejo}]
      default: a
development:
  summary: Implemented.
  commit_message: "feat: sso"
  log: [editing]
  stderr: [careful]
  files:
    src/sso.go: "package src\n"
    README.md: "# hi\n"
ci_fix:
  summary: first
  commit_message: "fix: ci"
  exit_code: 1
  per_attempt:
    "2": {summary: second, exit_code: 0}
answer:
  no_result: true
review:
  raw_result: "not json"
`

func TestParseAndStep(t *testing.T) {
	t.Parallel()
	sc, err := script.Parse([]byte(sample))
	require.NoError(t, err)
	st, err := sc.Step("ci_fix", 1)
	require.NoError(t, err)
	require.Equal(t, "first", st.Summary)
	require.Equal(t, 1, st.ExitCode)
	st, err = sc.Step("ci_fix", 2)
	require.NoError(t, err)
	require.Equal(t, "second", st.Summary)
	require.Equal(t, 0, st.ExitCode)
	require.Equal(t, "fix: ci", st.CommitMessage, "keys absent from the override are kept")
	_, err = sc.Step("analysis.technical", 1)
	require.ErrorContains(t, err, "no step")

	for name, bad := range map[string]string{
		"unknown key":   "development: {summary: x, comit_message: y}",
		"escaping path": "development: {files: {../x: y}}",
		"absolute path": "development: {files: {/etc/x: y}}",
		"bad override":  "development: {per_attempt: {\"2\": {bogus: 1}}}",
		"empty":         "{}",
		"not a map":     "- a",
	} {
		_, err := script.Parse([]byte(bad))
		require.Error(t, err, name)
	}
	// JSON is YAML.
	_, err = script.Parse([]byte(`{"default": {"summary": "x"}}`))
	require.NoError(t, err)
}

type playBundle struct {
	in, ws, out string
}

// setupPlay prepares a run of the script agent on in with the sample script.
func setupPlay(t *testing.T, in phase.Input) *playBundle {
	t.Helper()
	return setupPlayScript(t, in, sample)
}

// setupPlayScript prepares a run of the script agent on in with the script text.
func setupPlayScript(t *testing.T, in phase.Input, text string) *playBundle {
	t.Helper()
	b := &playBundle{in: t.TempDir(), ws: t.TempDir(), out: t.TempDir()}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(b.in, "input.json"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(b.in, script.ScriptFile), []byte(text), 0o644))
	return b
}

// play runs the agent and returns its exit code, stdout and stderr.
func (b *playBundle) play(t *testing.T) (int, string, string) {
	var out, errOut bytes.Buffer
	code := b.playTo(&out, &errOut)
	return code, out.String(), errOut.String()
}

// playTo runs the agent with its output written to stdout and stderr as it goes.
func (b *playBundle) playTo(stdout, stderr io.Writer) int {
	return script.Play([]string{"-script", filepath.Join(b.in, script.ScriptFile), "-input", filepath.Join(b.in, "input.json"),
		"-workspace", b.ws, "-out", b.out}, stdout, stderr)
}

func TestPlayDevelopment(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.Development, Key: "development", Attempt: 1}
	b := setupPlay(t, in)
	code, out, errOut := b.play(t)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "editing\n")
	require.Contains(t, errOut, "careful\n")
	got, err := os.ReadFile(filepath.Join(b.ws, "src", "sso.go"))
	require.NoError(t, err)
	require.Equal(t, "package src\n", string(got))

	a, err := script.NewFromBytes("", []byte(sample))
	require.NoError(t, err)
	res, err := a.Result(in, runner.ExitState{}, nil, b.out)
	require.NoError(t, err)
	require.Equal(t, "feat: sso", res.CommitMessage)
}

func TestPlayAttemptAndFailures(t *testing.T) {
	t.Parallel()
	a, err := script.NewFromBytes("img", []byte(sample))
	require.NoError(t, err)

	in := phase.Input{Phase: phase.CIFix, Key: "ci_fix", Attempt: 1}
	code, _, _ := setupPlay(t, in).play(t)
	require.Equal(t, 1, code)
	in.Attempt = 2
	code, _, _ = setupPlay(t, in).play(t)
	require.Equal(t, 0, code)

	in = phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1}
	b := setupPlay(t, in)
	code, _, _ = b.play(t)
	require.Equal(t, 0, code)
	_, err = a.Result(in, runner.ExitState{}, nil, b.out)
	require.ErrorIs(t, err, phase.ErrNoResult)
	require.EqualError(t, err, "agent wrote no result")

	in = phase.Input{Phase: phase.Review, Key: "review", Attempt: 1}
	b = setupPlay(t, in)
	code, _, _ = b.play(t)
	require.Equal(t, 0, code)
	_, err = a.Result(in, runner.ExitState{}, nil, b.out)
	require.ErrorIs(t, err, phase.ErrInvalidResult)

	in = phase.Input{Phase: phase.Analysis, Step: phase.StepTechnical, Key: "analysis.technical", Attempt: 1}
	code, _, errOut := setupPlay(t, in).play(t)
	require.Equal(t, script.ExitUsage, code)
	require.Contains(t, errOut, "no step")

	_, err = a.Result(in, runner.ExitState{Code: 137, Killed: true}, nil, t.TempDir())
	require.ErrorContains(t, err, "killed")
	_, err = a.Result(in, runner.ExitState{Code: 2}, nil, t.TempDir())
	require.ErrorContains(t, err, "code 2")
}

func TestCommand(t *testing.T) {
	t.Parallel()
	a, err := script.NewFromBytes("alfred/script-agent:test", []byte(sample))
	require.NoError(t, err)
	inv, err := a.Command(phase.Input{Phase: phase.Answer, Key: "answer"})
	require.NoError(t, err)
	require.Equal(t, "alfred/script-agent:test", inv.Image)
	require.Equal(t, []string{"-script", "/alfred/in/script.yaml"}, inv.Cmd)
	require.Equal(t, sample, string(inv.Files[script.ScriptFile]))
	require.Equal(t, "script", a.Name())
}

// A step with wait_for_file is held until the file appears in the output directory, then
// writes its files and result; -version answers 0 without an input (alfred doctor runs it).
func TestPlayWaitsForTheReleaseFileAndAnswersVersion(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.Development, Key: "development", Attempt: 1}
	b := setupPlayScript(t, in, "development: {summary: held, log: [started], wait_for_file: release, files: {a.txt: x}}")
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errOut bytes.Buffer
		code := b.playTo(pw, &errOut)
		pw.CloseWithError(fmt.Errorf("exit %d: %s", code, errOut.String()))
		done <- code
	}()
	lines := bufio.NewReader(pr)
	_, err := lines.ReadString('\n') // the agent's own first line
	require.NoError(t, err)
	l, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "started\n", l, "the step's log line, printed before it waits")
	// The step's files and result come right after its log line unless it waits: watched for
	// a while (a step that does not wait ends within it on any machine not starved of CPU).
	rest := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, lines); rest <- err }()
	select {
	case <-done:
		t.Fatal("the step did not wait for its release file")
	case <-time.After(500 * time.Millisecond):
	}
	_, err = os.Stat(filepath.Join(b.ws, "a.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "no file written while held")
	require.NoError(t, os.WriteFile(filepath.Join(b.out, "release"), nil, 0o644))
	require.Equal(t, 0, <-done)
	require.ErrorContains(t, <-rest, "exit 0")
	_, err = os.Stat(filepath.Join(b.ws, "a.txt"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(b.out, "release"))
	require.ErrorIs(t, err, os.ErrNotExist, "the release file is removed")

	var out, errOut bytes.Buffer
	require.Equal(t, 0, script.Play([]string{"-version"}, &out, &errOut), errOut.String())
	require.Equal(t, "alfred-script-agent\n", out.String())
}

// A step with flood_after_file prints its log lines, then holds its flood until the file
// appears in the output directory (and removes it): the first flood line is read only after
// the release file is gone.
func TestPlayHoldsTheFloodForItsReleaseFile(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.Development, Key: "development", Attempt: 1}
	b := setupPlayScript(t, in, "development: {summary: flooded, log: [session-line], flood_after_file: flood, flood_bytes: 1000}")
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errOut bytes.Buffer
		code := b.playTo(pw, &errOut)
		pw.CloseWithError(fmt.Errorf("exit %d: %s", code, errOut.String()))
		done <- code
	}()
	lines := bufio.NewReader(pr)
	_, err := lines.ReadString('\n') // the agent's own first line
	require.NoError(t, err)
	l, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "session-line\n", l)
	release := filepath.Join(b.out, "flood")
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	l, err = lines.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(l, "flood "), "%q", l)
	_, err = os.Stat(release)
	require.ErrorIs(t, err, os.ErrNotExist, "the flood came before its release file was seen")
	_, err = io.Copy(io.Discard, lines)
	require.ErrorContains(t, err, "exit 0")
	require.Equal(t, 0, <-done)
}
