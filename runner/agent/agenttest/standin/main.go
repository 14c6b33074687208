// Command standin is a stand-in for the five coding-agent CLIs the adapters drive — claude,
// codex, opencode, copilot and gemini — for the fast container suite. It behaves as the CLI
// named by the base name of argv[0] (or by its first argument when invoked as "standin"),
// following spec/agents.md:
//
//   - it accepts exactly the flags the adapters use (anything else exits 2, so a changed
//     command line is noticed) and reads the prompt from argv only, never from stdin;
//   - it prints that CLI's output events on stdout (§1–§5 Output);
//   - it stores each session under the CLI's real session directory below $HOME (or
//     $OPENCODE_DB), appending every prompt, and resumes by exact id only: its reply, like the
//     mock model of spec/agents.md, lists the MARK-… tokens found in the whole history, so a
//     resumed run shows the marks of earlier runs;
//   - it refuses an unknown resume id with the CLI's message and exit code (Adapter notes 3) and
//     a reused new-session id the same way the CLI does;
//   - it writes /alfred/out/result.json with the minimal valid fields of the run's phase (read
//     from /alfred/in/input.json), the reply as summary, and a file in /workspace for
//     read-write phases;
//   - claude waits, before it answers, while its session directory holds a file named HoldFile
//     ("standin-hold"): a test that creates it on the host keeps the run's container running
//     until it removes the file (the run's own time limit still applies);
//   - like the real CLIs it writes a state file in the CLI's own config directory (~/.claude,
//     ~/.codex, ~/.copilot, ~/.gemini, ~/.local/share/opencode) and warns on stderr
//     ("standin: warning: config dir not writable") when it cannot.
//
// The session files are the stand-in's own JSONL (one {"role","content"} object a line), not the
// CLIs' formats; only their locations and the ids follow spec/agents.md.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "standin" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	var code int
	switch name {
	case "claude":
		code = claude(args)
	case "codex":
		code = codex(args)
	case "opencode":
		code = opencode(args)
	case "copilot":
		code = copilot(args)
	case "gemini":
		code = gemini(args)
	default:
		fmt.Fprintf(os.Stderr, "standin: unknown CLI %q\n", name)
		code = 2
	}
	os.Exit(code)
}

// flags parses args against spec (flag → takes a value); "--flag=value" is accepted for
// value flags. Unknown flags are an error. Positional arguments are returned in order.
func flags(args []string, spec map[string]bool) (map[string]string, []string, error) {
	got := map[string]string{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		k, v, hasEq := strings.Cut(a, "=")
		takes, ok := spec[k]
		if !ok {
			return nil, nil, fmt.Errorf("error: unexpected argument '%s' found", a)
		}
		switch {
		case !takes:
			v = "true"
		case hasEq:
		case i+1 < len(args):
			i++
			v = args[i]
		default:
			return nil, nil, fmt.Errorf("error: %s needs a value", k)
		}
		got[k] = v
	}
	return got, pos, nil
}

func usage(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 2
}

func home() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	return "/alfred/home"
}

func cwd() string {
	d, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return d
}

// touchConfig writes a state file in the CLI's config dir, as the real CLIs do.
func touchConfig(dir string) {
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "standin-state.json"), []byte(`{"runs":1}`), 0o600)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "standin: warning: config dir not writable: %v\n", err)
	}
}

// message is one line of a stand-in session file.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func readSession(path string) ([]message, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var msgs []message
	for _, l := range strings.Split(string(data), "\n") {
		var m message
		if json.Unmarshal([]byte(l), &m) == nil && m.Role != "" {
			msgs = append(msgs, m)
		}
	}
	return msgs, nil
}

// converse appends prompt and the reply to the session file at path (created when missing)
// and returns the reply and the number of user turns in the session.
func converse(path, prompt string) (string, int, error) {
	msgs, _ := readSession(path)
	msgs = append(msgs, message{"user", prompt})
	r := reply(msgs)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", 0, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	for _, m := range []message{{"user", prompt}, {"assistant", r}} {
		b, _ := json.Marshal(m)
		if _, err := f.Write(append(b, '\n')); err != nil {
			return "", 0, err
		}
	}
	turns := 0
	for _, m := range msgs {
		if m.Role == "user" {
			turns++
		}
	}
	return r, turns, nil
}

var markRe = regexp.MustCompile(`MARK-[A-Z0-9]+`)

// reply is the mock model's answer: the MARK-… tokens of the user messages, in order of first
// appearance.
func reply(msgs []message) string {
	var marks []string
	seen := map[string]bool{}
	for _, m := range msgs {
		if m.Role != "user" {
			continue
		}
		for _, k := range markRe.FindAllString(m.Content, -1) {
			if !seen[k] {
				seen[k] = true
				marks = append(marks, k)
			}
		}
	}
	return "MOCK reply; marks seen: " + strings.Join(marks, ",")
}

// writeResult writes /alfred/out/result.json for the run's phase (and a file in /workspace
// for read-write phases).
func writeResult(cli, text string) error {
	data, err := os.ReadFile(filepath.Join(runner.InputDir, "input.json"))
	if err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	var in phase.Input
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("decode input: %w", err)
	}
	r := phase.Result{Summary: text}
	switch in.Phase {
	case phase.Analysis:
		if in.Step == phase.StepTechnical {
			r.Plan = "1. " + text
		} else {
			r.Understanding = text
		}
	case phase.Answer:
		r.Answer = text
	}
	if !in.Phase.ReadOnly() {
		r.CommitMessage = "chore: " + cli + " stand-in change"
		// One file per run key and attempt, so that every read-write run changes the tree.
		f := filepath.Join(runner.WorkspaceDir, fmt.Sprintf("standin-%s-%s-a%d.txt", cli, in.Key, in.Attempt))
		if err := os.WriteFile(f, []byte(text+"\n"), 0o644); err != nil {
			return fmt.Errorf("write workspace: %w", err)
		}
	}
	out, _ := json.Marshal(r)
	return os.WriteFile(filepath.Join(runner.OutputDir, phase.ResultFile), out, 0o644)
}

// HoldFile is the file in the session directory that makes claude wait (hold).
const HoldFile = "standin-hold"

// hold waits while dir/HoldFile exists.
func hold(dir string) {
	for {
		if _, err := os.Stat(filepath.Join(dir, HoldFile)); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func newUUID(version byte) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if version == 7 {
		ms := uint64(time.Now().UnixMilli())
		for i := 0; i < 6; i++ {
			b[i] = byte(ms >> (40 - 8*i))
		}
	}
	b[6] = b[6]&0x0f | version<<4
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func fail(code int, format string, a ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	return code
}
