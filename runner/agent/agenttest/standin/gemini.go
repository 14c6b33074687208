package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// gemini plays Gemini CLI's `gemini` (spec/agents.md §5) on args and returns the exit code.
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
