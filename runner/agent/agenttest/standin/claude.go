package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// claude plays Claude Code's `claude` (spec/agents.md §1) on args and returns the exit code.
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
	hold(dir)
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
