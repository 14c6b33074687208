package realcli_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest/mockmodel"
	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/agent/codex"
	"github.com/alfred-bot/alfred/runner/agent/internal/clitest"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Where the recorded real streams live, and the runs recorded for each CLI version:
// real_<version>_<run>.jsonl is the CLI's stdout, real_<version>_<run>.meta.json how it was
// produced (Meta).
const (
	claudeTestdata = "../claudecode/testdata"
	codexTestdata  = "../codex/testdata"
	runFresh       = "fresh"       // new session, prompt carries MARK-ALPHA
	runResumed     = "resumed"     // resume of the fresh session by exact id, prompt carries MARK-BETA
	runResumeMiss  = "resume_miss" // resume of an id that does not exist
)

// Session ids used by the recorded runs. Claude Code takes a caller-chosen UUID; Codex assigns
// its thread id, so only the unknown one is fixed.
const (
	claudeSessionID = "44444444-2222-4333-8444-555555555555"
	claudeUnknownID = "0badc0de-0000-4000-8000-000000000000"
	codexUnknownID  = "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
	sessionName     = "agent/issue-12-real-cli"
)

// Meta describes how a recorded stream was produced.
type Meta struct {
	// Package is the npm package and version the CLI came from; Version what --version printed.
	Package string `json:"package"`
	Version string `json:"version"`
	// Input is what the adapter's Command was given; Cmd and Env what it produced (Cmd[0] is
	// the adapter's binary name; the test ran the npm-installed binary in its place).
	Input phase.Input `json:"input"`
	Cmd   []string    `json:"cmd"`
	Env   []string    `json:"env"`
	// ExitCode and Stderr of the run. Paths are sanitized in Stderr and in the stream: the
	// worktree is /workspace, HOME /alfred/home, the mock's URL http://127.0.0.1:MOCK.
	ExitCode int    `json:"exit_code"`
	Stderr   string `json:"stderr,omitempty"`
}

// input is the run's Input: an answer run whose title carries the run's mark.
func input(mark string) phase.Input {
	return phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Repo: "group/app", Issue: 12,
		Title: "Remember " + mark, Description: "Reply with the marks you see."}
}

// recordName is the base name of a recorded run of a CLI version: real_<version>_<run>.
func recordName(version, run string) string { return "real_" + version + "_" + run }

// recordedVersions lists the CLI versions that have a recorded fresh run in dir.
func recordedVersions(t *testing.T, dir string) []string {
	t.Helper()
	metas, err := filepath.Glob(filepath.Join(dir, recordName("*", runFresh)+".meta.json"))
	require.NoError(t, err)
	var vs []string
	for _, m := range metas {
		vs = append(vs, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m), "real_"), "_"+runFresh+".meta.json"))
	}
	return vs
}

// readRecorded reads dir/real_<version>_<run>.jsonl and its .meta.json; ok is false when that
// run was not recorded.
func readRecorded(t *testing.T, dir, version, run string) (stdout []byte, m Meta, ok bool) {
	t.Helper()
	stdout, err := os.ReadFile(filepath.Join(dir, recordName(version, run)+".jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, m, false
	}
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, recordName(version, run)+".meta.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	return stdout, m, true
}

// golden compares v, as indented JSON, with dir/name (rewritten under -update).
func golden(t *testing.T, dir, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join(dir, name)
	if *clitest.Update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), path)
}

func newClaude(t *testing.T, baseURL string) *claudecode.Agent {
	t.Helper()
	a, err := claudecode.New(claudecode.Config{Image: "realcli-host", APIKey: "sk-ant-mock-not-real", BaseURL: baseURL})
	require.NoError(t, err)
	return a
}

func newCodex(t *testing.T, baseURL string) *codex.Agent {
	t.Helper()
	a, err := codex.New(codex.Config{Image: "realcli-host", APIKey: "sk-codex-mock-not-real", BaseURL: baseURL})
	require.NoError(t, err)
	return a
}

// checkClaude asserts what the adapter reads from one Claude Code run (live or recorded). prev
// is the fresh run's stream when run is the resumed one.
func checkClaude(t *testing.T, run string, stdout []byte, m Meta, prev *claudecode.Stream) *claudecode.Stream {
	t.Helper()
	a := newClaude(t, "http://127.0.0.1:1")
	s := claudecode.ParseStream(stdout)
	exit := runner.ExitState{Code: m.ExitCode}
	empty := t.TempDir()
	require.Zero(t, s.Skipped, "every stdout line is a JSON event")
	require.NotNil(t, s.Final, "a result event")
	switch run {
	case runFresh, runResumed:
		require.Equal(t, 0, m.ExitCode, m.Stderr)
		require.Equal(t, claudeSessionID, s.SessionID)
		require.Equal(t, claudeSessionID, s.Final.SessionID)
		require.Equal(t, m.Version, s.Version)
		require.Equal(t, "success", s.Final.Subtype)
		require.False(t, s.Final.IsError)
		require.True(t, strings.HasPrefix(s.Final.Result, mockmodel.ReplyPrefix), s.Final.Result)
		require.Contains(t, s.Final.Result, "MARK-ALPHA")
		in, out := s.Final.Tokens()
		require.Positive(t, in)
		require.Positive(t, out)
		require.Positive(t, s.Final.Usage.InputTokens)
		if run == runResumed {
			require.Contains(t, s.Final.Result, "MARK-BETA")
			// Capabilities().CumulativeUsage: on the versions the adapter verifies, tokens (from
			// modelUsage) and cost are session totals after a resume. 2.1.197 reported this
			// run only, one reason it is not verified.
			require.NotNil(t, prev)
			prevIn, prevOut := prev.Final.Tokens()
			if a.ResumeVerified(m.Version) {
				require.Equal(t, 2*prevIn, in, "cumulative input tokens")
				require.Equal(t, 2*prevOut, out, "cumulative output tokens")
				require.InDelta(t, 2*prev.Final.TotalCostUSD, s.Final.TotalCostUSD, 1e-9, "cumulative cost")
			} else {
				t.Logf("%s (not verified): tokens %d/%d after %d/%d, cost %g after %g", m.Version,
					in, out, prevIn, prevOut, s.Final.TotalCostUSD, prev.Final.TotalCostUSD)
			}
		}
		// The agent did not write result.json (the mock only talks): everything before it
		// passed, including the session id check of a resumed run.
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		_, err = a.Result(m.Input, exit, stdout, empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
	case runResumeMiss:
		require.NotEqual(t, 0, m.ExitCode)
		require.True(t, s.ResumeFailed(), "result.errors names the missing session")
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
		_, err = a.Result(m.Input, exit, stdout, empty)
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
	}
	return s
}

// checkCodex asserts what the adapter reads from one Codex run (live or recorded). prev is the
// fresh run's stream when run is the resumed one.
func checkCodex(t *testing.T, run string, stdout []byte, m Meta, prev *codex.Stream) *codex.Stream {
	t.Helper()
	a := newCodex(t, "http://127.0.0.1:1/v1")
	s := codex.ParseStream(stdout)
	exit := runner.ExitState{Code: m.ExitCode}
	empty := t.TempDir()
	require.Zero(t, s.Skipped, "every stdout line is a JSON event")
	switch run {
	case runFresh, runResumed:
		require.Equal(t, 0, m.ExitCode, m.Stderr)
		require.Len(t, s.ThreadID, 36, "a UUID thread id")
		if run == runResumed {
			require.NotNil(t, prev)
			require.Equal(t, prev.ThreadID, s.ThreadID, "resumed the same thread")
			require.Equal(t, prev.ThreadID, m.Input.SessionID)
		}
		require.Empty(t, s.Failed)
		require.True(t, strings.HasPrefix(s.FinalText, mockmodel.ReplyPrefix), s.FinalText)
		require.Contains(t, s.FinalText, "MARK-ALPHA")
		require.NotNil(t, s.Usage)
		require.Positive(t, s.Usage.InputTokens)
		require.Positive(t, s.Usage.OutputTokens)
		if run == runResumed {
			require.Contains(t, s.FinalText, "MARK-BETA")
			if a.ResumeVerified(m.Version) { // Capabilities().CumulativeUsage: thread totals
				require.Equal(t, 2*prev.Usage.InputTokens, s.Usage.InputTokens, "cumulative input tokens")
				require.Equal(t, 2*prev.Usage.OutputTokens, s.Usage.OutputTokens, "cumulative output tokens")
			}
		}
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		_, err = a.Result(m.Input, exit, stdout, empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
	case runResumeMiss:
		require.NotEqual(t, 0, m.ExitCode)
		require.Empty(t, s.ThreadID)
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
		require.Contains(t, err.Error(), "no rollout found for thread id")
		_, err = a.Result(m.Input, exit, stdout, empty) // without stderr: inferred from the shape
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
	}
	return s
}

// TestRecordedClaudeStreams parses the recorded real Claude Code streams of every recorded
// version (skipped when none were recorded) and compares each parse with
// parse_real_<version>_<run>.golden.json.
func TestRecordedClaudeStreams(t *testing.T) {
	versions := recordedVersions(t, claudeTestdata)
	if len(versions) == 0 {
		t.Skipf("no %s/real_*.jsonl recorded: make realcli-test REALCLI_ARGS=-update", claudeTestdata)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			var prev *claudecode.Stream
			for _, run := range []string{runFresh, runResumed, runResumeMiss} {
				stdout, m, ok := readRecorded(t, claudeTestdata, v, run)
				require.True(t, ok, "%s %s recorded", v, run)
				require.Equal(t, v, m.Version)
				t.Run(run, func(t *testing.T) {
					s := checkClaude(t, run, stdout, m, prev)
					if run == runFresh {
						prev = s
					}
					golden(t, claudeTestdata, "parse_"+recordName(v, run)+".golden.json", s)
				})
			}
		})
	}
}

// TestRecordedCodexStreams is TestRecordedClaudeStreams for Codex.
func TestRecordedCodexStreams(t *testing.T) {
	versions := recordedVersions(t, codexTestdata)
	if len(versions) == 0 {
		t.Skipf("no %s/real_*.jsonl recorded: make realcli-test REALCLI_ARGS=-update", codexTestdata)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			var prev *codex.Stream
			for _, run := range []string{runFresh, runResumed, runResumeMiss} {
				stdout, m, ok := readRecorded(t, codexTestdata, v, run)
				require.True(t, ok, "%s %s recorded", v, run)
				require.Equal(t, v, m.Version)
				t.Run(run, func(t *testing.T) {
					s := checkCodex(t, run, stdout, m, prev)
					if run == runFresh {
						prev = s
					}
					golden(t, codexTestdata, "parse_"+recordName(v, run)+".golden.json", s)
				})
			}
		})
	}
}
