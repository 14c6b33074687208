package main

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// codex plays Codex's `codex exec` (spec/agents.md §2) on args and returns the exit code.
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
