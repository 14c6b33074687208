// Package agenttest runs the CLI adapters (claudecode, codex, opencode, copilot, gemini)
// against stand-in CLIs in real containers: BuildImage builds one image holding the stand-in
// (./standin) under the five CLI names, and Run executes one adapter invocation the way the
// Executor does (HOME=/alfred/home on a tmpfs, /workspace, /alfred/in read-only, /alfred/out,
// and the session directory at Capabilities().SessionStatePath), through a runner.Runtime.
package agenttest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// StandinPackage is the import path of the stand-in CLI.
const StandinPackage = "github.com/alfred-bot/alfred/runner/agent/agenttest/standin"

// StandinHoldFile is the file that, in a run's session directory, makes the stand-in claude
// wait before it answers until the file is removed (the stand-in's HoldFile): a test keeps a
// run's container running with it.
const StandinHoldFile = "standin-hold"

// CLIs are the names the stand-in answers to; BuildImage installs it as /bin/<name> for each.
var CLIs = []string{"claude", "codex", "opencode", "copilot", "gemini"}

var seq atomic.Int64

// BuildImage compiles the stand-in (CGO_ENABLED=0, the daemon's architecture) and builds,
// through the Engine API,
//
//	FROM scratch
//	COPY standin /bin/<cli>      (once per name in CLIs)
//	ENV PATH=/bin
//	USER 65532:65532
//
// with no ENTRYPOINT: the adapter's Cmd[0] ("claude", "codex", …) is resolved on the image's
// PATH. The image gets a tag unique to the test process and is removed when the test ends.
// It returns the tag; failures are fatal.
func BuildImage(tb testing.TB, ctx context.Context, cli *client.Client) string {
	tb.Helper()
	tag := fmt.Sprintf("alfred-test/agent-standin:%d-%d", os.Getpid(), seq.Add(1))
	return runtimetest.BuildImageFrom(tb, ctx, cli, tag, StandinPackage, dockerfile())
}

// BuildImageOnce is BuildImage built once for the tests of the process
// (runtimetest.BuildImageFromOnce): each call returns a tag of the test's own on the shared
// image, removed when the test ends. The package's TestMain calls
// runtimetest.RemoveImagesBuiltOnce after m.Run.
func BuildImageOnce(tb testing.TB, ctx context.Context, cli *client.Client) string {
	tb.Helper()
	tag := fmt.Sprintf("alfred-test/agent-standin:%d-%d", os.Getpid(), seq.Add(1))
	return runtimetest.BuildImageFromOnce(tb, ctx, cli, tag, StandinPackage, dockerfile())
}

// dockerfile is the stand-in image's Dockerfile (BuildImage).
func dockerfile() string {
	df := "FROM scratch\n"
	for _, c := range CLIs {
		df += fmt.Sprintf("COPY standin /bin/%s\n", c)
	}
	return df + "ENV PATH=/bin\nUSER " + runtimetest.ImageUser + "\n"
}

// Spec is one adapter run for Run.
type Spec struct {
	Agent runner.SessionAgent
	Input phase.Input
	// Worktree is the host directory mounted at /workspace (read-only for read-only phases).
	Worktree string
	// SessionDir is the host directory mounted at the adapter's SessionStatePath; "" for none.
	SessionDir string
	// Timeout bounds the run (30 s if zero).
	Timeout time.Duration
	// WritableParents mounts, with the session directory, a fresh host directory at the first
	// directory below HOME on the way to SessionStatePath (e.g. /alfred/home/.codex), with the
	// intermediate directories pre-created and writable. Without it the runtime creates those
	// parents itself, owned by root with mode 0755, and the CLI cannot write its own config dir
	// (see ConfigRoot).
	WritableParents bool
}

// ConfigRoot returns the first directory below runner.HomeDir on the way to a session state
// path ("/alfred/home/.codex" for "/alfred/home/.codex/sessions"), and the path of the state
// dir relative to it ("sessions"); ok is false when the state path is a direct child of HOME
// (nothing to create) or not below HOME.
func ConfigRoot(statePath string) (root, rel string, ok bool) { return runner.ConfigRoot(statePath) }

// Outcome is what a Run left: the invocation, the exit state, both output streams and the host
// output directory (result.json and any usage file).
type Outcome struct {
	Invocation runner.Invocation
	Exit       runner.ExitState
	Stdout     []byte
	Stderr     []byte
	OutDir     string
}

// StderrResulter is implemented by the adapters of this repository: Result with the CLI's
// stderr, where four of the five CLIs report a refused resume (spec/agents.md, "Adapter
// notes" 3).
type StderrResulter = runner.StderrResulter

// Result is the adapter's reading of the outcome, with stderr when the adapter takes it.
func (o *Outcome) Result(a runner.Agent, in phase.Input) (*phase.Result, error) {
	if sr, ok := a.(StderrResulter); ok {
		return sr.ResultStderr(in, o.Exit, o.Stdout, o.Stderr, o.OutDir)
	}
	return a.Result(in, o.Exit, o.Stdout, o.OutDir)
}

// Run executes one invocation of s.Agent in a container of rt, as the Executor would: the
// container user is runtimetest.ImageUser, HOME is runner.HomeDir (a tmpfs made by the
// runtime), cwd /workspace, input.json and Invocation.Files in /alfred/in (read-only),
// /alfred/out writable, and s.SessionDir at Capabilities().SessionStatePath. The container is
// destroyed before Run returns; failures to run at all are fatal.
func Run(tb testing.TB, ctx context.Context, rt runner.Runtime, s Spec) *Outcome {
	tb.Helper()
	inv, err := s.Agent.Command(s.Input)
	if err != nil {
		tb.Fatalf("%s: command: %v", s.Agent.Name(), err)
	}
	inDir, outDir := writeRunDirs(tb, inv, s.Input)
	mounts := append([]runner.Mount{
		{Source: s.Worktree, Target: runner.WorkspaceDir, ReadOnly: s.Input.Phase.ReadOnly()},
		{Source: inDir, Target: runner.InputDir, ReadOnly: true},
		{Source: outDir, Target: runner.OutputDir},
	}, sessionMounts(tb, s)...)
	name := fmt.Sprintf("alfred-agenttest-%d-%d", os.Getpid(), seq.Add(1))
	h, err := rt.Start(ctx, runner.ContainerSpec{
		Name:       name,
		Image:      inv.Image,
		Cmd:        inv.Cmd,
		Env:        append([]string{"HOME=" + runner.HomeDir}, inv.Env...),
		WorkingDir: runner.WorkspaceDir,
		User:       runtimetest.ImageUser,
		Mounts:     mounts,
		Labels:     map[string]string{runner.LabelManaged: "true", runner.LabelRun: name},
	})
	if err != nil {
		tb.Fatalf("%s: start: %v", s.Agent.Name(), err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = runner.Teardown(cctx, rt, h)
	}()
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exit, err := rt.Wait(wctx, h.ID)
	if err != nil {
		tb.Fatalf("%s: wait: %v", s.Agent.Name(), err)
	}
	stdout, stderr, err := rt.Logs(ctx, h.ID)
	if err != nil {
		tb.Fatalf("%s: logs: %v", s.Agent.Name(), err)
	}
	return &Outcome{Invocation: inv, Exit: exit, Stdout: stdout, Stderr: stderr, OutDir: outDir}
}

// writeRunDirs makes a run's input directory (input.json and the invocation's files) and its
// output directory (writable by any container user) and returns both.
func writeRunDirs(tb testing.TB, inv runner.Invocation, in phase.Input) (inDir, outDir string) {
	tb.Helper()
	base := tb.TempDir()
	inDir, outDir = filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{inDir, outDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Chmod(outDir, 0o777); err != nil {
		tb.Fatal(err)
	}
	files := maps.Clone(inv.Files)
	if files == nil {
		files = map[string][]byte{}
	}
	files["input.json"], _ = json.Marshal(in)
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(inDir, n), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return inDir, outDir
}

// sessionMounts returns the mounts of s.SessionDir: none without one; else the session
// directory at Capabilities().SessionStatePath, behind a writable host directory at the
// configuration root (with the parents of the state path made) when s.WritableParents.
func sessionMounts(tb testing.TB, s Spec) []runner.Mount {
	tb.Helper()
	if s.SessionDir == "" {
		return nil
	}
	var mounts []runner.Mount
	state := s.Agent.Capabilities().SessionStatePath
	if root, rel, ok := ConfigRoot(state); ok && s.WritableParents {
		host := HostDir(tb)
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			p := filepath.Join(host, d)
			if err := os.MkdirAll(p, 0o777); err != nil {
				tb.Fatal(err)
			}
			if err := os.Chmod(p, 0o777); err != nil {
				tb.Fatal(err)
			}
		}
		mounts = append(mounts, runner.Mount{Source: host, Target: root})
	}
	return append(mounts, runner.Mount{Source: s.SessionDir, Target: state})
}

// HostDir returns a new temporary host directory writable by the container user (mode 0777),
// for worktrees and session directories.
func HostDir(tb testing.TB) string {
	tb.Helper()
	d := tb.TempDir()
	if err := os.Chmod(d, 0o777); err != nil {
		tb.Fatal(err)
	}
	return d
}
