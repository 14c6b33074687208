package script

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
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
	inputPath := fs.String("input", runner.InputDir+"/input.json", "phase.Input as JSON")
	workspace := fs.String("workspace", runner.WorkspaceDir, "workspace directory")
	outDir := fs.String("out", runner.OutputDir, "output directory for "+phase.ResultFile)
	version := fs.Bool("version", false, "print the program's name and exit 0 (alfred doctor runs it)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *version {
		fmt.Fprintln(stdout, "alfred-script-agent")
		return 0
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "alfred-script-agent: "+format+"\n", a...)
		return code
	}
	in, key, st, err := loadStep(*inputPath, *scriptPath)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	fmt.Fprintf(stdout, "alfred-script-agent: %s attempt %d, issue %s#%d\n", key, in.Attempt, in.Repo, in.Issue)
	for _, l := range st.Log {
		fmt.Fprintln(stdout, l)
	}
	if st.FloodAfterFile != "" {
		waitForFile(*outDir, st.FloodAfterFile)
	}
	if err := st.flood(stdout); err != nil {
		return fail(ExitWriteFiles, "flood: %v", err)
	}
	for _, l := range st.Stderr {
		fmt.Fprintln(stderr, l)
	}
	if st.SleepSeconds > 0 {
		time.Sleep(time.Duration(st.SleepSeconds * float64(time.Second)))
	}
	if st.WaitForFile != "" {
		waitForFile(*outDir, st.WaitForFile)
	}
	if err := st.apply(&in, *workspace, stdout); err != nil {
		return fail(ExitWriteFiles, "%v", err)
	}
	if !writeFiles(*workspace, st, stdout, stderr) || !st.playRedTeamNet(*workspace, stdout, stderr) {
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
	if err := st.plant(*workspace, *outDir, stdout); err != nil {
		return fail(ExitResult, "%v", err)
	}
	return st.ExitCode
}

// waitForFile returns once a file named name (its base name) exists in outDir, and removes
// it: it is not part of the run's output. It checks every 50 ms; the run's timeout bounds it.
func waitForFile(outDir, name string) {
	release := filepath.Join(outDir, filepath.Base(name))
	for {
		if _, err := os.Stat(release); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a file another process writes
	}
	_ = os.Remove(release)
}

// loadStep reads the input and the script and returns the input, its step key (Input.Key, or
// the phase and step's KeyOf) and the script's step for that key and the input's attempt.
func loadStep(inputPath, scriptPath string) (phase.Input, string, *Step, error) {
	var in phase.Input
	data, err := os.ReadFile(inputPath)
	if err != nil {
		return in, "", nil, fmt.Errorf("read input: %w", err)
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return in, "", nil, fmt.Errorf("parse input: %w", err)
	}
	data, err = os.ReadFile(scriptPath)
	if err != nil {
		return in, "", nil, fmt.Errorf("read script: %w", err)
	}
	sc, err := Parse(data)
	if err != nil {
		return in, "", nil, err
	}
	key := in.Key
	if key == "" {
		key = phase.KeyOf(in.Phase, in.Step)
	}
	st, err := sc.Step(key, in.Attempt)
	return in, key, st, err
}

// writeFiles writes the step's files into workspace in path order, reporting each on stdout
// and each failure on stderr; it reports whether all were written.
func writeFiles(workspace string, st *Step, stdout, stderr io.Writer) bool {
	paths := slices.Sorted(maps.Keys(st.Files))
	ok := true
	for _, p := range paths {
		clean, err := CleanPath(p)
		if err == nil {
			target := filepath.Join(workspace, filepath.FromSlash(clean))
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				err = os.WriteFile(target, []byte(st.Files[p]), 0o644)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "alfred-script-agent: write %s: %v\n", p, err)
			ok = false
			continue
		}
		fmt.Fprintf(stdout, "wrote %s\n", clean)
	}
	return ok
}
