package codex

import (
	"encoding/json"

	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
)

// Stream is what ParseStream extracts from `codex exec --json` output (JSONL; event types
// thread.started, turn.started, turn.completed, turn.failed, item.*, error — §2 Output).
type Stream struct {
	// ThreadID is thread.started.thread_id: the session id (UUIDv7).
	ThreadID string `json:"thread_id"`
	// FinalText is the text of the last completed agent_message item.
	FinalText string `json:"final_text,omitempty"`
	// Usage is the last turn.completed usage; nil if no turn completed.
	Usage *Usage `json:"usage,omitempty"`
	// Failed is turn.failed.error.message, "" if no turn failed.
	Failed string `json:"failed,omitempty"`
	// Errors are the messages of error events and error items (retries, warnings).
	Errors []string `json:"errors,omitempty"`
	// Events counts the JSON lines; Skipped the lines that were not JSON objects.
	Events  int `json:"events"`
	Skipped int `json:"skipped,omitempty"`
}

// Usage is turn.completed.usage; token counts, thread totals after a resume (§2 Output).
type Usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens,omitempty"`
	OutputTokens          int64 `json:"output_tokens"`
	ReasoningOutputTokens int64 `json:"reasoning_output_tokens"`
}

// ParseStream reads `exec --json` output; it never fails.
func ParseStream(stdout []byte) *Stream {
	s := &Stream{}
	s.Events, s.Skipped = clikit.Lines(stdout, func(typ string, line []byte) {
		var ev struct {
			ThreadID string `json:"thread_id"`
			Usage    *Usage `json:"usage"`
			Message  string `json:"message"`
			Error    *struct {
				Message string `json:"message"`
			} `json:"error"`
			Item *struct {
				Type    string `json:"type"`
				Text    string `json:"text"`
				Message string `json:"message"`
			} `json:"item"`
		}
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		switch typ {
		case "thread.started":
			if s.ThreadID == "" {
				s.ThreadID = ev.ThreadID
			}
		case "turn.completed":
			if ev.Usage != nil {
				s.Usage = ev.Usage
			}
		case "turn.failed":
			s.Failed = "turn failed"
			if ev.Error != nil {
				s.Failed = ev.Error.Message
			}
		case "error":
			s.Errors = append(s.Errors, ev.Message)
		case "item.completed":
			if ev.Item == nil {
				return
			}
			switch ev.Item.Type {
			case "agent_message":
				s.FinalText = ev.Item.Text
			case "error":
				s.Errors = append(s.Errors, ev.Item.Message)
			}
		}
	})
	return s
}
