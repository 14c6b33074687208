package runner_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/apimode"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// inContainer is the container baseline of BenchmarkFunctionalAnalysisAPIMode: an adapter
// whose image runs API mode's own loop (apimode-in-container) in a run container.
type inContainer struct {
	image, baseURL, model, key string
}

func (c inContainer) Name() string { return "in-container" }

func (c inContainer) Command(phase.Input) (runner.Invocation, error) {
	return runner.Invocation{Image: c.image, Env: []string{"APIMODE_KIND=" + apimode.Anthropic,
		"APIMODE_MODEL=" + c.model, "APIMODE_KEY=" + c.key, "APIMODE_BASE_URL=" + c.baseURL}}, nil
}

func (c inContainer) Result(in phase.Input, exit runner.ExitState, _ []byte, outDir string) (*phase.Result, error) {
	if exit.Code != 0 {
		return nil, fmt.Errorf("exit %d", exit.Code)
	}
	return runner.ReadResultFile(in, outDir)
}

// BenchmarkFunctionalAnalysisAPIMode measures a functional analysis (two model turns, three
// tool calls on the worktree) against the same stand-in model, in the same run: in API mode
// (in process, no container) and through a run container doing the same loop with the same
// SDK. The difference is the container's start, mounts, wait, logs and removal plus a process
// start; a real CLI's own start-up comes on top of the container figure. Run it bounded:
// go test ./runner -run '^$' -bench FunctionalAnalysisAPIMode -benchtime 10x
func BenchmarkFunctionalAnalysisAPIMode(b *testing.B) {
	ctx := context.Background()
	srv := apimodetest.NewAnthropic(b, apiKey, "claude-standin", apimodetest.Analyst("README", map[string]string{
		"analysis.functional": `{"summary": "Understood.", "understanding": "The readme says hi."}`}))
	in := phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional, Repo: "acme/shop", Issue: 1, Title: "CSV"}
	wt := worktree(b)

	api, err := apimode.New(apimode.Config{Kind: apimode.Anthropic, Model: "claude-standin", APIKey: apiKey, BaseURL: srv.BaseURL()})
	require.NoError(b, err)
	cli := runtimetest.Client(b)
	image := runtimetest.BuildImage(b, ctx, cli, fmt.Sprintf("alfred-test/apimode-in-container:%d", os.Getpid()),
		"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest/apimode-in-container")
	box := inContainer{image: image, baseURL: srv.BaseURL(), model: "claude-standin", key: apiKey}
	ex, err := runner.NewExecutor(runner.Config{Runtime: docker.New(cli),
		Agents:   map[string]runner.Agent{"api": api, "box": box},
		Bindings: map[phase.Phase]string{phase.Analysis: "api"}, DataDir: b.TempDir(),
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID, HostNetwork: true,
		Limits:  runner.Limits{MemoryBytes: 256 << 20, NanoCPUs: 1e9, PIDs: 128},
		Timeout: time.Minute, StopGrace: time.Second})
	require.NoError(b, err)

	for _, mode := range []string{"api", "box"} {
		b.Run(map[string]string{"api": "api_mode", "box": "container"}[mode], func(b *testing.B) {
			run := in
			run.Agent = mode
			start, n := time.Now(), 0
			for b.Loop() {
				out, err := ex.Run(ctx, runner.RunRequest{MailboxID: 97, RunID: runSeq.Add(1), Attempt: 1, Input: run, Worktree: wt})
				require.NoError(b, err)
				require.Equal(b, runner.StatusSucceeded, out.Status, "%v\n%s\n%s", out.Err, out.Stdout, out.Stderr)
				require.Equal(b, "The readme says hi.", out.Result.Understanding)
				n++
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1e3/float64(n), "ms/run")
		})
	}
}
