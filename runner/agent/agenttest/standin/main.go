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
//     reference's mock model, lists the MARK-… tokens found in the whole history, so a resumed
//     run shows the marks of earlier runs;
//   - it refuses an unknown resume id with the CLI's message and exit code (Adapter notes 3) and
//     a reused new-session id the same way the CLI does;
//   - it writes /alfred/out/result.json with the minimal valid fields of the run's phase (read
//     from /alfred/in/input.json), the reply as summary, and a file in /workspace for
//     read-write phases;
//   - like the real CLIs it writes a state file in the CLI's own config directory (~/.claude,
//     ~/.codex, ~/.copilot, ~/.gemini, ~/.local/share/opencode) and warns on stderr
//     ("standin: warning: config dir not writable") when it cannot.
//
// The session files are the stand-in's own JSONL (one {"role","content"} object a line), not the
// CLIs' formats; only their locations and the ids follow the reference.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
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

// ---- claude (§1) ----

func claude(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("2.1.332 (Claude Code)")
		return 0
	}
	f, _, err := flags(args, map[string]bool{"-p": true, "--output-format": true, "--verbose": false,
		"--permission-mode": true, "--model": true, "--max-turns": true, "--session-id": true, "-n": true, "--resume": true})
	if err != nil {
		return usage(err)
	}
	if f["-p"] == "" {
		return fail(1, "Error: Input must be provided either through stdin or as a prompt argument when using --print")
	}
	if f["--output-format"] == "stream-json" && f["--verbose"] == "" {
		return fail(1, "Error: When using --print, --output-format=stream-json requires --verbose")
	}
	touchConfig(filepath.Join(home(), ".claude"))
	slug := regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(cwd(), "-")
	dir := filepath.Join(home(), ".claude", "projects", slug)
	id := f["--session-id"]
	switch {
	case f["--resume"] != "":
		id = f["--resume"]
		if _, err := os.Stat(filepath.Join(dir, id+".jsonl")); err != nil {
			msg := "No conversation found with session ID: " + id
			emit(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "num_turns": 0,
				"result": "", "session_id": newUUID(4), "total_cost_usd": 0, "usage": map[string]int{"input_tokens": 0, "output_tokens": 0},
				"errors": []string{msg}})
			return fail(1, "%s", msg)
		}
	case id != "":
		if !uuidRe.MatchString(id) {
			return fail(1, "Error: Invalid session ID. Must be a valid UUID.")
		}
		if _, err := os.Stat(filepath.Join(dir, id+".jsonl")); err == nil {
			return fail(1, "Error: Session ID %s is already in use.", id)
		}
	default:
		id = newUUID(4)
	}
	text, turns, err := converse(filepath.Join(dir, id+".jsonl"), f["-p"])
	if err != nil {
		return fail(1, "Error: %v", err)
	}
	model := f["--model"]
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	emit(map[string]any{"type": "system", "subtype": "init", "cwd": cwd(), "session_id": id, "model": model,
		"permissionMode": f["--permission-mode"], "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": "2.1.332"})
	emit(map[string]any{"type": "assistant", "message": map[string]any{"id": "msg_standin", "role": "assistant",
		"content": []any{map[string]string{"type": "text", "text": text}}}, "session_id": id})
	if err := writeResult("claude", text); err != nil {
		return fail(1, "Error: %v", err)
	}
	n := int64(turns) // cumulative after resume: total_cost_usd and modelUsage (§1 Output)
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 1, "result": text,
		"session_id": id, "total_cost_usd": 0.000495 * float64(n), "usage": map[string]int64{"input_tokens": 120, "output_tokens": 9},
		"modelUsage":         map[string]any{model: map[string]any{"inputTokens": 120 * n, "outputTokens": 9 * n, "costUSD": 0.000495 * float64(n)}},
		"permission_denials": []any{}, "terminal_reason": "completed"})
	return 0
}

// ---- codex (§2) ----

func codex(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("codex-cli 0.171.0")
		return 0
	}
	if len(args) == 0 || args[0] != "exec" {
		return usage(fmt.Errorf("standin codex: only `exec` is implemented"))
	}
	_, pos, err := flags(args[1:], map[string]bool{"--json": false, "--skip-git-repo-check": false,
		"--dangerously-bypass-approvals-and-sandbox": false, "-m": true, "-c": true})
	if err != nil {
		return usage(err)
	}
	touchConfig(filepath.Join(home(), ".codex"))
	sessions := filepath.Join(home(), ".codex", "sessions")
	var id, path string
	if len(pos) > 0 && pos[0] == "resume" {
		if len(pos) != 3 {
			return usage(fmt.Errorf("error: resume takes <SESSION_ID> <PROMPT>"))
		}
		id, pos = pos[1], pos[2:]
		_ = filepath.WalkDir(sessions, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, "-"+id+".jsonl") {
				path = p
			}
			return nil
		})
		if path == "" {
			return fail(1, "Error: thread/resume: thread/resume failed: no rollout found for thread id %s (code -32600)", id)
		}
	} else {
		id = newUUID(7)
		now := time.Now().UTC()
		path = filepath.Join(sessions, now.Format("2006/01/02"), "rollout-"+now.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
	}
	if len(pos) != 1 || pos[0] == "-" {
		return fail(1, "standin codex: the prompt must be one argument (stdin is not read)")
	}
	text, turns, err := converse(path, pos[0])
	if err != nil {
		return fail(1, "Error: %v", err)
	}
	emit(map[string]any{"type": "thread.started", "thread_id": id})
	emit(map[string]any{"type": "turn.started"})
	if err := writeResult("codex", text); err != nil {
		emit(map[string]any{"type": "turn.failed", "error": map[string]string{"message": err.Error()}})
		return 1
	}
	emit(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_0", "type": "agent_message", "text": text}})
	n := int64(turns) // thread-cumulative usage after resume (§2 Output)
	emit(map[string]any{"type": "turn.completed", "usage": map[string]int64{"input_tokens": 120 * n, "cached_input_tokens": 0,
		"cache_write_input_tokens": 0, "output_tokens": 9 * n, "reasoning_output_tokens": 0}})
	return 0
}

// ---- opencode (§3) ----

func opencode(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("1.18.33")
		return 0
	}
	if len(args) == 0 || args[0] != "run" {
		return usage(fmt.Errorf("standin opencode: only `run` is implemented"))
	}
	f, pos, err := flags(args[1:], map[string]bool{"--format": true, "--auto": false, "-m": true, "--session": true, "--title": true})
	if err != nil {
		return usage(err)
	}
	touchConfig(filepath.Join(home(), ".local", "share", "opencode"))
	db := os.Getenv("OPENCODE_DB")
	if db == "" {
		db = filepath.Join(home(), ".local", "share", "opencode", "opencode.db")
	}
	// The stand-in keeps one session file per id next to $OPENCODE_DB (the real CLI: one SQLite
	// database there).
	id := f["--session"]
	if id != "" {
		if _, err := os.Stat(db + "." + id + ".jsonl"); err != nil {
			return fail(1, "\x1b[91m\x1b[1mError: \x1b[0mSession not found")
		}
	} else {
		id = "ses_" + strings.ReplaceAll(newUUID(4), "-", "")[:26]
	}
	if len(pos) == 0 {
		return fail(1, "standin opencode: no message (stdin is not read)")
	}
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return fail(1, "Error: %v", err)
	}
	if err := os.WriteFile(db, []byte("standin opencode db\n"), 0o600); err != nil {
		return fail(1, "Error: %v", err)
	}
	text, _, err := converse(db+"."+id+".jsonl", strings.Join(pos, " "))
	if err != nil {
		return fail(1, "Error: %v", err)
	}
	ts := time.Now().UnixMilli()
	emit(map[string]any{"type": "step_start", "timestamp": ts, "sessionID": id, "part": map[string]string{"type": "step-start"}})
	if err := writeResult("opencode", text); err != nil {
		emit(map[string]any{"type": "error", "timestamp": ts, "sessionID": id, "error": map[string]any{"name": "UnknownError", "data": map[string]string{"message": err.Error()}}})
		return 1
	}
	emit(map[string]any{"type": "text", "timestamp": ts, "sessionID": id, "part": map[string]string{"type": "text", "text": text}})
	emit(map[string]any{"type": "step_finish", "timestamp": ts, "sessionID": id, "part": map[string]any{"type": "step-finish", "reason": "stop",
		"tokens": map[string]any{"total": 129, "input": 120, "output": 9, "reasoning": 0, "cache": map[string]int{"write": 0, "read": 0}}, "cost": 0}})
	return 0
}

// ---- copilot (§4) ----

func copilot(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.")
		return 0
	}
	f, _, err := flags(args, map[string]bool{"-p": true, "--output-format": true, "--allow-all": false, "--no-ask-user": false,
		"--no-auto-update": false, "--model": true, "--session-id": true, "-n": true, "--resume": true, "--usage-output-file": true})
	if err != nil {
		return usage(err)
	}
	if f["-p"] == "" {
		return fail(1, "standin copilot: no -p prompt (stdin is not read)")
	}
	touchConfig(filepath.Join(home(), ".copilot"))
	states := filepath.Join(home(), ".copilot", "session-state")
	id := f["--session-id"]
	switch {
	case f["--resume"] != "":
		id = f["--resume"]
		if _, err := os.Stat(filepath.Join(states, id, "events.jsonl")); err != nil {
			return fail(1, "Error: No session, task, or name matched '%s'.\n\nTry 'copilot --help' for more information.", id)
		}
	case id != "":
		if !uuidRe.MatchString(id) {
			return fail(1, "Error: No session or task matched '%s'. The value is not a valid UUID, so a new session cannot be created.", id)
		}
		if _, err := os.Stat(filepath.Join(states, id, "events.jsonl")); err == nil && f["-n"] != "" {
			return fail(1, "Error: --name cannot be used with --session-id of an existing session.")
		}
	default:
		id = newUUID(4)
	}
	dir := filepath.Join(states, id)
	text, turns, err := converse(filepath.Join(dir, "events.jsonl"), f["-p"])
	if err != nil {
		return fail(1, "Error: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace.yaml")); err != nil {
		_ = os.WriteFile(filepath.Join(dir, "workspace.yaml"), []byte(fmt.Sprintf("id: %s\ncwd: %s\nname: %q\nuser_named: %t\n", id, cwd(), f["-n"], f["-n"] != "")), 0o600)
	}
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	emit(map[string]any{"type": "user.message", "data": map[string]string{"content": f["-p"]}, "id": "e1", "timestamp": ts})
	code := 0
	if err := writeResult("copilot", text); err != nil {
		emit(map[string]any{"type": "session.error", "data": map[string]string{"message": err.Error()}, "id": "e2", "timestamp": ts})
		code = 1
	} else {
		emit(map[string]any{"type": "assistant.message", "data": map[string]any{"messageId": "m1", "model": "standin", "content": text, "toolRequests": []any{}}, "id": "e2", "timestamp": ts})
	}
	emit(map[string]any{"type": "result", "timestamp": ts, "sessionId": id, "exitCode": code, "usage": map[string]any{"premiumRequests": 0}})
	if p := f["--usage-output-file"]; p != "" {
		// Session totals, as the real CLI writes them after a resume (copilot/testdata).
		_ = os.WriteFile(p, []byte(fmt.Sprintf(`{"totalPremiumRequestCost":0,"totalNanoAiu":0,"modelMetrics":{"standin":{"usage":{"inputTokens":%d,"outputTokens":%d,"cacheReadTokens":0,"cacheWriteTokens":0}}}}`, 120*turns, 9*turns)), 0o644)
	}
	return code
}

// ---- gemini (§5) ----

func gemini(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("0.61.0")
		return 0
	}
	f, _, err := flags(args, map[string]bool{"-p": true, "-o": true, "--skip-trust": false, "--approval-mode": true,
		"-m": true, "--session-id": true, "--resume": true})
	if err != nil {
		return usage(err)
	}
	if f["--skip-trust"] == "" {
		return fail(55, "Gemini CLI is not running in a trusted directory.")
	}
	if f["-p"] == "" {
		return fail(42, "standin gemini: no -p prompt (stdin is not read)")
	}
	touchConfig(filepath.Join(home(), ".gemini"))
	chats := filepath.Join(home(), ".gemini", "tmp", filepath.Base(cwd()), "chats") // project slug: cwd basename in 0.61.0
	find := func(id string) string {
		if len(id) < 8 {
			return ""
		}
		m, _ := filepath.Glob(filepath.Join(chats, "session-*-"+id[:8]+".jsonl"))
		sort.Strings(m)
		for _, p := range m {
			if msgs, _ := readSession(p); len(msgs) > 0 && msgs[0].Content == id {
				return p
			}
		}
		return ""
	}
	id, path := f["--session-id"], ""
	switch {
	case f["--resume"] != "":
		id = f["--resume"]
		if path = find(id); path == "" {
			return fail(42, "Error resuming session: Invalid session identifier %q. Searched for sessions in %s.", id, chats)
		}
	case id != "":
		if !uuidRe.MatchString(id) {
			return fail(42, "Error starting session: invalid session id %q", id)
		}
		if find(id) != "" {
			return fail(42, "Error starting session: Session ID %q already exists. Use --resume to resume it.", id)
		}
	default:
		id = newUUID(4)
	}
	if path == "" {
		path = filepath.Join(chats, "session-"+time.Now().UTC().Format("2006-01-02T15-04")+"-"+id[:8]+".jsonl")
		if err := os.MkdirAll(chats, 0o700); err != nil {
			return fail(1, "Error: %v", err)
		}
		b, _ := json.Marshal(message{"meta", id}) // first line: the session id (the real file: sessionId, projectHash)
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return fail(1, "Error: %v", err)
		}
	}
	text, _, err := converse(path, f["-p"])
	if err != nil {
		return fail(1, "Error: %v", err)
	}
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	model := f["-m"]
	if model == "" {
		model = "gemini-2.5-flash"
	}
	emit(map[string]any{"type": "init", "timestamp": ts, "session_id": id, "model": model})
	emit(map[string]any{"type": "message", "timestamp": ts, "role": "user", "content": f["-p"]})
	if err := writeResult("gemini", text); err != nil {
		emit(map[string]any{"type": "result", "timestamp": ts, "status": "error", "error": map[string]string{"type": "Error", "message": err.Error()}, "stats": map[string]int{}})
		return 1
	}
	emit(map[string]any{"type": "message", "timestamp": ts, "role": "assistant", "content": text, "delta": true})
	emit(map[string]any{"type": "result", "timestamp": ts, "status": "success", "stats": map[string]any{"total_tokens": 129,
		"input_tokens": 120, "output_tokens": 9, "cached": 0, "input": 120, "duration_ms": 1, "tool_calls": 0}})
	return 0
}
