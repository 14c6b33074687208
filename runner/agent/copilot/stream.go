package copilot

import (
	"encoding/json"

	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
)

// Stream is what ParseStream extracts from `--output-format json` output (JSONL; events
// user.message, assistant.message(_delta), session.*, tool.*, result — §4 Output).
type Stream struct {
	// FinalText is the last assistant.message data.content.
	FinalText string `json:"final_text,omitempty"`
	// Final is the result event; nil when the stream has none (e.g. aborted by SIGTERM).
	Final *ResultEvent `json:"final,omitempty"`
	// Aborted is true when an assistant.idle event says aborted (SIGTERM, §4 Failure detection).
	Aborted bool `json:"aborted,omitempty"`
	// Errors are session.error messages.
	Errors []string `json:"errors,omitempty"`
	// Events counts the JSON lines; Skipped the lines that were not JSON objects.
	Events  int `json:"events"`
	Skipped int `json:"skipped,omitempty"`
}

// ResultEvent is the final `{"type":"result",…}` event: the session id and the exit code.
type ResultEvent struct {
	SessionID string `json:"sessionId"`
	ExitCode  int    `json:"exitCode"`
}

// ParseStream reads `--output-format json` output; it never fails.
func ParseStream(stdout []byte) *Stream {
	s := &Stream{}
	s.Events, s.Skipped = clikit.Lines(stdout, func(typ string, line []byte) {
		switch typ {
		case "result":
			var ev ResultEvent
			if json.Unmarshal(line, &ev) == nil {
				s.Final = &ev
			}
		case "assistant.message", "assistant.idle", "session.error":
			var ev struct {
				Data struct {
					Content string `json:"content"`
					Aborted bool   `json:"aborted"`
					Message string `json:"message"`
				} `json:"data"`
			}
			if json.Unmarshal(line, &ev) != nil {
				return
			}
			switch typ {
			case "assistant.message":
				if ev.Data.Content != "" {
					s.FinalText = ev.Data.Content
				}
			case "assistant.idle":
				s.Aborted = s.Aborted || ev.Data.Aborted
			case "session.error":
				msg := ev.Data.Message
				if msg == "" {
					msg = string(line)
				}
				s.Errors = append(s.Errors, msg)
			}
		}
	})
	return s
}
