// Package clikit is the shared base of the coding-agent CLI adapters (claudecode, codex,
// opencode, copilot, gemini). An adapter declares its CLI (CLI: name, executable, command line,
// key variable, session flags, verified versions, how a resume is refused, how its output is
// read) and clikit.Agent does the rest: configuration (Config, New), Capabilities, version
// checks, the command line, and the order of the result checks. It also holds the prompt,
// JSONL scanning, the result-file fallback, UUID and version checks, and the typed "cannot
// resume" error. Facts about the CLIs are in spec/agents.md; each adapter cites its own section.
package clikit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Lines calls fn for every line of JSONL output that is a JSON object, with its "type" field,
// and returns how many lines were objects (events) and how many were skipped (noise, truncated
// tails). It never fails.
func Lines(stdout []byte, fn func(typ string, line []byte)) (events, skipped int) {
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var head struct {
			Type string `json:"type"`
		}
		if line[0] != '{' || json.Unmarshal(line, &head) != nil {
			skipped++
			continue
		}
		events++
		fn(head.Type, line)
	}
	return events, skipped
}

// JSONObject extracts a JSON object from an agent's final text: the whole text, or the body of
// a ```json fence.
func JSONObject(text string) ([]byte, bool) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```json")
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimSuffix(strings.TrimSpace(t), "```")
		t = strings.TrimSpace(t)
	}
	if !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
		return nil, false
	}
	return []byte(t), true
}

// ReadResult reads <outDir>/result.json with runner.ReadResultFile; when the file is missing
// and finalText is a JSON object (see JSONObject) it is decoded and validated instead. Errors
// wrap runner.ErrNoResult or runner.ErrInvalidResult.
func ReadResult(in phase.Input, outDir, finalText string) (*phase.Result, error) {
	r, err := runner.ReadResultFile(in, outDir)
	if errors.Is(err, phase.ErrNoResult) {
		if obj, ok := JSONObject(finalText); ok {
			r, err = phase.DecodeResult(in, obj)
		}
	}
	return r, err
}

// IsUUID reports whether s is a UUID in its canonical 8-4-4-4-12 hex form (any version).
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// SessionNotFoundError is returned by an adapter's Result when the CLI refused to resume the
// requested session (spec/agents.md, "Adapter notes" 3). It matches runner.ErrSessionNotFound
// with errors.Is.
type SessionNotFoundError struct {
	// Agent is the adapter name ("codex", …).
	Agent string
	// SessionID is the id the run asked to resume.
	SessionID string
	// Signal is the evidence: the CLI's message, or, when only the exit code and an empty stream
	// were available (stderr not given to Result), a description of that inference.
	Signal string
}

// Error describes the missing session.
func (e *SessionNotFoundError) Error() string {
	return fmt.Sprintf("%s: cannot resume session %s: %s", e.Agent, e.SessionID, e.Signal)
}

// Is reports whether target is runner.ErrSessionNotFound.
func (e *SessionNotFoundError) Is(target error) bool { return target == runner.ErrSessionNotFound }

// MismatchError is returned when the CLI's stream reports another session than the one asked
// for: the "silent new session" trap (spec/agents.md, "Adapter notes" 2).
type MismatchError struct {
	// Agent is the adapter name.
	Agent string
	// Requested is the session id the run asked for; Got the one the stream reported.
	Requested string
	Got       string
}

// Error describes the mismatch.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: asked for session %s, the CLI ran session %s", e.Agent, e.Requested, e.Got)
}

// StderrLine returns the first line of stderr containing substr, without ANSI colour codes
// (opencode colours its errors, spec/agents.md §3 Failure detection), trimmed; "" if none.
func StderrLine(stderr []byte, substr string) string {
	for _, l := range strings.Split(StripANSI(string(stderr)), "\n") {
		if strings.Contains(l, substr) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

var ansiRe = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// StripANSI removes ANSI escape sequences.
func StripANSI(s string) string { return ansiRe.ReplaceAllString(s, "") }

// Versions is the set of CLI versions on which resume by id is verified: for each "major.minor"
// line, the lowest verified patch. A version is verified when its line is in the set and its
// patch is at least that minimum, or when it is listed in Exact. Pre-release and build suffixes
// ("2.1.332-beta") are never verified.
type Versions struct {
	// MinPatch maps "major.minor" to the lowest verified patch of that line.
	MinPatch map[string]int
	// Exact lists further verified versions, e.g. from operator configuration.
	Exact []string
}

// VerifiedWith reports whether v is in the set or among extra (an operator's exact versions).
func (vs Versions) VerifiedWith(v string, extra []string) bool {
	for _, e := range extra {
		if e == v {
			return true
		}
	}
	return vs.Verified(v)
}

// Verified reports whether v is in the set.
func (vs Versions) Verified(v string) bool {
	for _, e := range vs.Exact {
		if e == v {
			return true
		}
	}
	m := semverRe.FindStringSubmatch(v)
	if m == nil || m[0] != v {
		return false
	}
	minPatch, ok := vs.MinPatch[m[1]+"."+m[2]]
	if !ok {
		return false
	}
	patch, err := strconv.Atoi(m[3])
	return err == nil && patch >= minPatch
}

var semverRe = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// ParseVersion returns the first major.minor.patch in output (a CLI's --version text), or an
// error naming the adapter.
func ParseVersion(agent, output string) (string, error) {
	m := semverRe.FindString(output)
	if m == "" {
		return "", fmt.Errorf("%s: no version in %q", agent, strings.TrimSpace(output))
	}
	return m, nil
}
