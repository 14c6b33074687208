package gemini

import (
	"encoding/json"
	"strings"

	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
)

// Stream is what ParseStream extracts from `-o stream-json` output (JSONL; event types init,
// message, tool_use, tool_result, error, result — §5 Output).
type Stream struct {
	// SessionID and Model are from the init event.
	SessionID string `json:"session_id"`
	Model     string `json:"model,omitempty"`
	// FinalText is the concatenated assistant message chunks after the last tool event.
	FinalText string `json:"final_text,omitempty"`
	// Final is the result event; nil if the stream has none.
	Final *ResultEvent `json:"final,omitempty"`
	// Errors are the messages of error events of severity "error" and of result.error.
	Errors []string `json:"errors,omitempty"`
	// Events counts the JSON lines; Skipped the lines that were not JSON objects.
	Events  int `json:"events"`
	Skipped int `json:"skipped,omitempty"`
}

// ResultEvent is the final `{"type":"result",…}` event.
type ResultEvent struct {
	Status string `json:"status"` // success or error
	Error  *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
	Stats Stats `json:"stats"`
}

// Stats is result.stats: token counts of the run.
type Stats struct {
	TotalTokens  int64 `json:"total_tokens"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Cached       int64 `json:"cached"`
	DurationMS   int64 `json:"duration_ms"`
	ToolCalls    int   `json:"tool_calls"`
}

// ParseStream reads stream-json output; it never fails.
func ParseStream(stdout []byte) *Stream {
	s := &Stream{}
	var text strings.Builder
	s.Events, s.Skipped = clikit.Lines(stdout, func(typ string, line []byte) {
		switch typ {
		case "init":
			var ev struct {
				SessionID string `json:"session_id"`
				Model     string `json:"model"`
			}
			if json.Unmarshal(line, &ev) == nil && s.SessionID == "" {
				s.SessionID, s.Model = ev.SessionID, ev.Model
			}
		case "message":
			var ev struct {
				Role    string `json:"role"`
				Content string `json:"content"`
				Delta   bool   `json:"delta"`
			}
			if json.Unmarshal(line, &ev) == nil && ev.Role == "assistant" {
				if !ev.Delta {
					text.Reset()
				}
				text.WriteString(ev.Content)
			}
		case "tool_use", "tool_result":
			text.Reset()
		case "error":
			var ev struct {
				Severity string `json:"severity"`
				Message  string `json:"message"`
			}
			if json.Unmarshal(line, &ev) == nil && ev.Severity != "warning" {
				s.Errors = append(s.Errors, ev.Message)
			}
		case "result":
			var ev ResultEvent
			if json.Unmarshal(line, &ev) == nil {
				s.Final = &ev
				if ev.Error != nil {
					s.Errors = append(s.Errors, ev.Error.Type+": "+ev.Error.Message)
				}
			}
		}
	})
	s.FinalText = text.String()
	return s
}
