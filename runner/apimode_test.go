package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/apimode"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// noContainers is a Runtime that refuses every call: an API-mode run must never reach it.
type noContainers struct{ t *testing.T }

func (n noContainers) fail(what string) error {
	n.t.Errorf("API mode called the container runtime: %s", what)
	return errors.New("no containers in API mode")
}
func (n noContainers) Start(context.Context, runner.ContainerSpec) (runner.Handle, error) {
	return runner.Handle{}, n.fail("Start")
}
func (n noContainers) Adopt(context.Context, string) (runner.Handle, error) {
	return runner.Handle{}, n.fail("Adopt")
}
func (n noContainers) Wait(context.Context, runner.ContainerID) (runner.ExitState, error) {
	return runner.ExitState{}, n.fail("Wait")
}
func (n noContainers) Logs(context.Context, runner.ContainerID) ([]byte, []byte, error) {
	return nil, nil, n.fail("Logs")
}
func (n noContainers) Stop(context.Context, runner.ContainerID, time.Duration) error {
	return n.fail("Stop")
}
func (n noContainers) Destroy(context.Context, runner.ContainerID) error { return n.fail("Destroy") }
func (n noContainers) List(context.Context, map[string]string) ([]runner.Container, error) {
	return nil, n.fail("List")
}

const apiKey = "sk-apimode-executor-0123456789abcdef"

func apiExecutor(t *testing.T, srv *apimodetest.Server, key string, timeout time.Duration) *runner.Executor {
	t.Helper()
	a, err := apimode.New(apimode.Config{Kind: apimode.OpenAI, Model: srv.Model, APIKey: key, BaseURL: srv.BaseURL(), MaxRetries: -1})
	require.NoError(t, err)
	c := censor.New(censor.Config{Secrets: []string{key}})
	exec, err := runner.NewExecutor(runner.Config{Runtime: noContainers{t}, Agents: map[string]runner.Agent{"api": a},
		Bindings: map[phase.Phase]string{phase.Analysis: "api", phase.Development: "api"}, DataDir: t.TempDir(), UID: 1000, GID: 1000,
		Timeout: timeout, Redact: c.String})
	require.NoError(t, err)
	return exec
}

func apiWorktree(t *testing.T) string {
	wt := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wt, "README.md"), []byte("MARK-README\n"), 0o644))
	return wt
}

func apiInput() phase.Input {
	return phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional, Repo: "acme/shop", Issue: 3, Title: "CSV"}
}

func TestExecutorRunsAPIModeWithoutAContainer(t *testing.T) {
	srv := apimodetest.NewOpenAI(t, apiKey, "gpt-standin", apimodetest.Analyst("README.md", map[string]string{
		// The model repeats the key it was given: the censor takes it out of the result.
		"analysis.functional": `{"summary": "read it; key ` + apiKey + `", "understanding": "MARK-README is the readme"}`}))
	exec := apiExecutor(t, srv, apiKey, time.Minute)
	out, err := exec.Run(context.Background(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Input: apiInput(), Worktree: apiWorktree(t)})
	require.NoError(t, err)
	require.Equal(t, runner.StatusSucceeded, out.Status, out.Stdout)
	assert.Equal(t, "MARK-README is the readme", out.Result.Understanding)
	assert.NotContains(t, out.Result.Summary, apiKey)
	assert.Contains(t, out.Result.Summary, "[redacted]")
	assert.Equal(t, "openai-api", out.Agent)
	assert.Equal(t, "alfred-mbx1-r2-analysis-a1", out.Name)
	assert.Empty(t, out.ID, "no container")
	require.NotNil(t, out.Usage)
	assert.Positive(t, out.Usage.InputTokens)
	assert.Contains(t, out.Stdout, "read_file")
}

// What the model says is hostile like a container's output: a summary over the log line's
// 200 bytes in a script of three-byte characters, with a NUL, and a tool call whose arguments
// hold a NUL, leave a log PostgreSQL stores (valid UTF-8, no NUL).
func TestExecutorAPIModeLogIsStorable(t *testing.T) {
	summary := `ab\u0000` + strings.Repeat("日本", 40) // JSON: a NUL in the string
	srv := apimodetest.NewOpenAI(t, apiKey, "gpt-standin", func(ex apimodetest.Exchange) apimodetest.Reply {
		if len(ex.Results) == 0 {
			return apimodetest.Reply{Calls: []apimodetest.Call{{Name: "read_file", Args: map[string]any{"path": "READ\x00ME.md"}}}}
		}
		return apimodetest.Reply{Text: `{"summary": "` + summary + `", "understanding": "ok"}`}
	})
	exec := apiExecutor(t, srv, apiKey, time.Minute)
	out, err := exec.Run(context.Background(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Input: apiInput(), Worktree: apiWorktree(t)})
	require.NoError(t, err)
	require.Equal(t, runner.StatusSucceeded, out.Status, out.Stdout)
	assert.Contains(t, out.Stdout, "日本日本")
	assert.True(t, utf8.ValidString(out.Stdout), "the log is valid UTF-8: %q", out.Stdout)
	assert.NotContains(t, out.Stdout, "\x00")
	assert.True(t, utf8.ValidString(out.Result.Summary))
	assert.NotContains(t, out.Result.Summary, "\x00")
}

func TestExecutorAPIModeFailures(t *testing.T) {
	t.Run("401 censored", func(t *testing.T) {
		srv := apimodetest.NewOpenAI(t, "sk-the-right-one-0000000000000", "gpt-standin", nil)
		exec := apiExecutor(t, srv, apiKey, time.Minute)
		out, err := exec.Run(context.Background(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Input: apiInput(), Worktree: apiWorktree(t)})
		require.NoError(t, err)
		assert.Equal(t, runner.StatusFailed, out.Status)
		// The stand-in echoes the wrong key in its message; neither the failure nor the log keeps it.
		assert.Contains(t, out.Err.Error(), "refused the API key: HTTP 401 invalid_request_error: Incorrect API key provided: [redacted]")
		assert.NotContains(t, out.Err.Error(), apiKey)
		assert.NotContains(t, out.Stdout, apiKey)
		var pe *apimode.ProviderError
		assert.ErrorAs(t, out.Err, &pe, "the censored error still unwraps")
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		srv := apimodetest.NewOpenAI(t, apiKey, "gpt-standin", func(apimodetest.Exchange) apimodetest.Reply {
			<-release
			return apimodetest.Reply{Text: "{}"}
		})
		exec := apiExecutor(t, srv, apiKey, 300*time.Millisecond)
		out, err := exec.Run(context.Background(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Input: apiInput(), Worktree: apiWorktree(t)})
		require.NoError(t, err)
		assert.Equal(t, runner.StatusTimedOut, out.Status)
		assert.ErrorIs(t, out.Err, runner.ErrTimeout)
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		srv := apimodetest.NewOpenAI(t, apiKey, "gpt-standin", func(apimodetest.Exchange) apimodetest.Reply {
			cancel()
			return apimodetest.Reply{Text: "{}"}
		})
		exec := apiExecutor(t, srv, apiKey, time.Minute)
		out, err := exec.Run(ctx, runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Input: apiInput(), Worktree: apiWorktree(t)})
		require.Error(t, err)
		assert.Equal(t, runner.StatusCanceled, out.Status)
	})
	t.Run("writing phase", func(t *testing.T) {
		srv := apimodetest.NewOpenAI(t, apiKey, "gpt-standin", nil)
		exec := apiExecutor(t, srv, apiKey, time.Minute)
		_, err := exec.Run(context.Background(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1,
			Input: phase.Input{Phase: phase.Development}, Worktree: apiWorktree(t)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "read-only phases only")
		assert.Zero(t, srv.Calls())
	})
}

// apiService is a Service running apiExecutor's adapter on a worktree of a one-commit
// repository.
func apiService(t *testing.T, srv *apimodetest.Server) (*runner.Service, phase.Job) {
	t.Helper()
	dir := t.TempDir()
	bare := seedRemote(t, dir, nil)
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: filepath.Join(dir, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.org"})
	require.NoError(t, err)
	svc := runner.NewService(apiExecutor(t, srv, apiKey, time.Minute), map[string]*gitrepo.Manager{"gl": mgr}, runner.SessionConfig{}, nil)
	return svc, phase.Job{MailboxID: 1, RunID: 2, Attempt: 1, ForgeName: "gl",
		Repository: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare}, Input: apiInput()}
}

// An API-mode run names no container in its outcome, finished or interrupted: there is none
// for the pages to show or for recovery to look for.
func TestServiceAPIModeRunNamesNoContainer(t *testing.T) {
	t.Run("finished", func(t *testing.T) {
		srv := apimodetest.NewOpenAI(t, apiKey, "gpt-standin", func(apimodetest.Exchange) apimodetest.Reply {
			return apimodetest.Reply{Text: `{"summary": "ok", "understanding": "ok"}`}
		})
		svc, job := apiService(t, srv)
		out, err := svc.Execute(context.Background(), job)
		require.NoError(t, err)
		require.Empty(t, out.Failure)
		assert.Empty(t, out.Container)
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		srv := apimodetest.NewOpenAI(t, apiKey, "gpt-standin", func(apimodetest.Exchange) apimodetest.Reply {
			cancel()
			return apimodetest.Reply{Text: "{}"}
		})
		svc, job := apiService(t, srv)
		out, err := svc.Execute(ctx, job)
		require.NoError(t, err)
		require.True(t, out.Interrupted)
		assert.Empty(t, out.Container)
	})
}
