package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// copilot plays GitHub Copilot CLI's `copilot` (spec/agents.md §4) on args and returns the exit code.
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
