package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// opencode plays OpenCode's `opencode run` (spec/agents.md §3) on args and returns the exit code.
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
