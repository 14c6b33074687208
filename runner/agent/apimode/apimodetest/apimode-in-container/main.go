// Command apimode-in-container runs API mode's tool loop inside a run container, as a CLI
// would: it reads /alfred/in/input.json, talks to the model at APIMODE_BASE_URL
// (APIMODE_KIND, APIMODE_MODEL, APIMODE_KEY) with the same SDK, tools and loop as the
// in-process adapter, reads /workspace, and writes /alfred/out/result.json. The benchmark of
// API mode uses it as the container baseline: the same phase against the same model, with
// only the container (and a process start) added. A real CLI adds its own start-up on top.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/apimode"
	"github.com/alfred-bot/alfred/runner/phase"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	data, err := os.ReadFile(runner.InputDir + "/input.json")
	if err != nil {
		return err
	}
	var in phase.Input
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	a, err := apimode.New(apimode.Config{Kind: os.Getenv("APIMODE_KIND"), Model: os.Getenv("APIMODE_MODEL"),
		APIKey: os.Getenv("APIMODE_KEY"), BaseURL: os.Getenv("APIMODE_BASE_URL")})
	if err != nil {
		return err
	}
	rep, err := a.RunAPI(context.Background(), runner.APIRun{Input: in, Worktree: runner.WorkspaceDir})
	fmt.Print(rep.Log)
	if err != nil {
		return err
	}
	out, err := json.Marshal(rep.Result)
	if err != nil {
		return err
	}
	return os.WriteFile(runner.OutputDir+"/"+phase.ResultFile, out, 0o644)
}
