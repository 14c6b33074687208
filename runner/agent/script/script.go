// Package script is the "script" agent adapter: a scripted stand-in for a coding-agent CLI, for
// tests and demos. The container runs cmd/alfred-script-agent, which looks up the run's step in
// a script file and plays it: writes files into the workspace, prints log lines, sleeps, writes
// /alfred/out/result.json and exits with the scripted code.
//
// # Script format
//
// A YAML (or JSON) mapping from run key (phase.Input.Key: "analysis.functional",
// "analysis.technical", "development", "ci_fix", "review_fix", "conflict_resolution", "answer",
// "review", "self_review") to a step. The fallback key "default" is used when the run's key is absent.
//
//	analysis.functional:
//	  summary: Understood the issue.            # any phase.Result field, by its JSON name:
//	  understanding: The login page must …      # understanding, questions, expected_behaviour,
//	  questions:                                # acceptance_criteria, out_of_scope, plan,
//	    - id: q1                                # commit_message, answer, …
//	      title: Which provider?
//	      options: [{id: a, label: GitLab}, {id: b, label: Forgejo}]
//	      default: a
//	development:
//	  summary: Implemented it.
//	  commit_message: "feat: login"
//	  files:                                    # relative path → content, written under /workspace
//	    src/login.go: "package src\n"
//	  log: ["editing src/login.go"]             # lines printed on stdout
//	  stderr: ["warning: none"]                 # lines printed on stderr
//	  sleep_seconds: 0.5                        # sleep before writing files and result
//	  exit_code: 0                              # process exit code
//	  no_result: false                          # true: write no result.json
//	  raw_result: ""                            # non-empty: written verbatim as result.json
//	ci_fix:
//	  summary: First try.
//	  per_attempt:                              # shallow overrides by attempt number
//	    "2": {summary: Second try., exit_code: 0}
//
// For the review loop (see ReviewLoop), comment_rules answer the comments of a review_fix run by
// their text and resolve_conflicts settles a conflict_resolution run's conflicts:
//
//	review_fix:
//	  summary: Addressed the review.
//	  commit_message: "fix: currency column"
//	  files: {report.py: "…"}
//	  comment_rules:                            # first match (case-insensitive substring) wins
//	    - {match: "why", outcome: answered, reply: "Because the server's locale is UTF-8."}
//	    - {match: "", outcome: fixed, reply: "Done."}    # "" matches every comment
//	conflict_resolution:
//	  summary: Kept both sides.
//	  resolve_conflicts: both                   # ours, theirs or both; absent: markers stay
//	review:
//	  summary: A few remarks.
//	  review_comments: [{path: docs/report.md, line: 3, body: "Say which month."}]
//	self_review:                                # the bot's own merge request
//	  summary: Read the diff against the plan.
//	  findings: [{path: report.py, line: 12, severity: blocking, text: "No test covers an empty month."}]
//
// A self-review's blocking findings reach the review_fix step as its comments (their text is
// the comment's), so comment_rules answer them too.
//
// Files are written whatever the phase: in read-only phases the mount refuses them, the agent
// reports the failure on stderr and exits 3 without a result (this is how tests prove that the
// workspace is read-only). Unknown keys in a step are an error. The steps of a prompt-injected
// agent (a planted link or FIFO, a flood of output) are in Hostile.
package script

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/alfred-bot/alfred/runner/phase"
)

// DefaultKey is the step used when the script has no step for the run's key.
const DefaultKey = "default"

// Step is one scripted run. The embedded phase.Result holds the fields written to result.json
// (its JSON names are the script's keys).
type Step struct {
	phase.Result
	ReviewLoop
	RedTeamNet
	Hostile
	// Files maps a slash-separated path relative to /workspace to the content to write.
	Files map[string]string `json:"files,omitempty"`
	// Log and Stderr are lines printed on stdout and stderr.
	Log    []string `json:"log,omitempty"`
	Stderr []string `json:"stderr,omitempty"`
	// SleepSeconds delays the step (before files and result), so tests can kill it mid-run.
	SleepSeconds float64 `json:"sleep_seconds,omitempty"`
	// WaitForFile holds the step (after its log lines, before its files and result) until a
	// file of that name exists in the run's output directory (runner.OutputDir; the host side
	// is DataDir/runs/<name>/out): a test releases a run it has checked while running, so
	// nothing depends on which comes first. Checked every 50 ms; the run's timeout bounds it.
	WaitForFile string `json:"wait_for_file,omitempty"`
	// ExitCode is the process exit code (0 by default).
	ExitCode int `json:"exit_code,omitempty"`
	// NoResult skips writing result.json.
	NoResult bool `json:"no_result,omitempty"`
	// RawResult, when not empty, is written verbatim as result.json instead of the Result.
	RawResult string `json:"raw_result,omitempty"`
	// PerAttempt maps an attempt number ("2") to step keys overriding this step's (shallow: a
	// key present in the override replaces the whole value).
	PerAttempt map[string]json.RawMessage `json:"per_attempt,omitempty"`
}

// Script is a parsed script file: run key → raw step (JSON).
type Script map[string]json.RawMessage

// Parse reads a YAML or JSON script and checks that every step (and every per-attempt
// override applied to it) decodes without unknown keys and that file paths stay inside the
// workspace.
func Parse(data []byte) (Script, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("parse script: %w", err)
	}
	var s Script
	if err := json.Unmarshal(js, &s); err != nil {
		return nil, fmt.Errorf("parse script: want a mapping from run key to step: %w", err)
	}
	if len(s) == 0 {
		return nil, errors.New("parse script: no steps")
	}
	for key, raw := range s {
		st, err := decodeStep(raw)
		if err != nil {
			return nil, fmt.Errorf("parse script: step %q: %w", key, err)
		}
		for n := range st.PerAttempt {
			if _, err := strconv.Atoi(n); err != nil {
				return nil, fmt.Errorf("parse script: step %q: per_attempt key %q is not a number", key, n)
			}
			if _, err := s.Step(key, mustAtoi(n)); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Step returns the step for key (or DefaultKey) with the overrides of attempt applied.
func (s Script) Step(key string, attempt int) (*Step, error) {
	raw, ok := s[key]
	if !ok {
		if raw, ok = s[DefaultKey]; !ok {
			return nil, fmt.Errorf("script has no step %q (and no %q)", key, DefaultKey)
		}
	}
	st, err := decodeStep(raw)
	if err != nil {
		return nil, fmt.Errorf("step %q: %w", key, err)
	}
	over, ok := st.PerAttempt[strconv.Itoa(attempt)]
	if !ok {
		return st, nil
	}
	var base, patch map[string]json.RawMessage
	if err := json.Unmarshal(raw, &base); err != nil {
		return nil, fmt.Errorf("step %q: %w", key, err)
	}
	if err := json.Unmarshal(over, &patch); err != nil {
		return nil, fmt.Errorf("step %q: per_attempt %d: want a mapping: %w", key, attempt, err)
	}
	for k, v := range patch {
		base[k] = v
	}
	delete(base, "per_attempt")
	merged, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	st, err = decodeStep(merged)
	if err != nil {
		return nil, fmt.Errorf("step %q attempt %d: %w", key, attempt, err)
	}
	return st, nil
}

func decodeStep(raw json.RawMessage) (*Step, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var st Step
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	for p := range st.Files {
		if _, err := CleanPath(p); err != nil {
			return nil, err
		}
	}
	return &st, nil
}

// CleanPath validates a script file path (relative, slash-separated, inside the workspace) and
// returns it cleaned.
func CleanPath(p string) (string, error) {
	c := path.Clean(p)
	if p == "" || path.IsAbs(p) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("file path %q must be relative and inside the workspace", p)
	}
	return c, nil
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
