package script

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Exit codes of Play besides the step's own exit_code.
const (
	ExitUsage      = 2 // bad flags, unreadable input or script, no step for the key
	ExitWriteFiles = 3 // a workspace file could not be written (read-only phase)
	ExitResult     = 4 // result.json could not be written
)

// Play is the body of cmd/alfred-script-agent: it parses args (-script, -input, -workspace,
// -out, defaulting to the container paths), plays the step for the input's key and attempt,
// and returns the process exit code. Log lines go to stdout, problems to stderr.
func Play(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("alfred-script-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scriptPath := fs.String("script", runner.InputDir+"/"+ScriptFile, "script file (YAML or JSON)")
	inputPath := fs.String("input", runner.InputDir+"/input.json", "runner.Input as JSON")
	workspace := fs.String("workspace", runner.WorkspaceDir, "workspace directory")
	outDir := fs.String("out", runner.OutputDir, "output directory for "+phase.ResultFile)
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "alfred-script-agent: "+format+"\n", a...)
		return code
	}

	var in phase.Input
	data, err := os.ReadFile(*inputPath)
	if err != nil {
		return fail(ExitUsage, "read input: %v", err)
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return fail(ExitUsage, "parse input: %v", err)
	}
	data, err = os.ReadFile(*scriptPath)
	if err != nil {
		return fail(ExitUsage, "read script: %v", err)
	}
	sc, err := Parse(data)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	key := in.Key
	if key == "" {
		key = phase.KeyOf(in.Phase, in.Step)
	}
	st, err := sc.Step(key, in.Attempt)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	fmt.Fprintf(stdout, "alfred-script-agent: %s attempt %d, issue %s#%d\n", key, in.Attempt, in.Repo, in.Issue)
	for _, l := range st.Log {
		fmt.Fprintln(stdout, l)
	}
	for _, l := range st.Stderr {
		fmt.Fprintln(stderr, l)
	}
	if st.SleepSeconds > 0 {
		time.Sleep(time.Duration(st.SleepSeconds * float64(time.Second)))
	}

	if err := st.apply(&in, *workspace, stdout); err != nil {
		return fail(ExitWriteFiles, "%v", err)
	}
	paths := make([]string, 0, len(st.Files))
	for p := range st.Files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	failed := false
	for _, p := range paths {
		clean, err := CleanPath(p)
		if err == nil {
			target := filepath.Join(*workspace, filepath.FromSlash(clean))
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				err = os.WriteFile(target, []byte(st.Files[p]), 0o644)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "alfred-script-agent: write %s: %v\n", p, err)
			failed = true
			continue
		}
		fmt.Fprintf(stdout, "wrote %s\n", clean)
	}
	if failed {
		return ExitWriteFiles
	}

	if !st.NoResult {
		out := []byte(st.RawResult)
		if st.RawResult == "" {
			if out, err = json.MarshalIndent(st.Result, "", "  "); err != nil {
				return fail(ExitResult, "encode result: %v", err)
			}
		}
		if err := os.WriteFile(filepath.Join(*outDir, phase.ResultFile), out, 0o644); err != nil {
			return fail(ExitResult, "write result: %v", err)
		}
		fmt.Fprintf(stdout, "wrote %s\n", phase.ResultFile)
	}
	return st.ExitCode
}
