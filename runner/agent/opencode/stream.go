package opencode

import (
	"encoding/json"
	"strings"

	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
)

// Stream is what ParseStream extracts from `opencode run --format json` output (JSONL; event
// types step_start, text, tool_use, step_finish, reasoning, error; every line carries
// sessionID — §3 Output).
type Stream struct {
	// SessionID is the first event's sessionID (ses_…).
	SessionID string `json:"session_id"`
	// OtherSessionID is a different sessionID seen on a later event, "" if all agree.
	OtherSessionID string `json:"other_session_id,omitempty"`
	// FinalText is the concatenated text parts of the last step.
	FinalText string `json:"final_text,omitempty"`
	// Steps counts step_finish events; LastReason is the last one's reason ("stop",
	// "tool-calls", …).
	Steps      int    `json:"steps"`
	LastReason string `json:"last_reason,omitempty"`
	// InputTokens (input + cache read + cache write), OutputTokens (output + reasoning) and
	// CostUSD are summed over step_finish events.
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// Errors are the error events' "name: message".
	Errors []string `json:"errors,omitempty"`
	// Events counts the JSON lines; Skipped the lines that were not JSON objects.
	Events  int `json:"events"`
	Skipped int `json:"skipped,omitempty"`
}

// ParseStream reads `run --format json` output; it never fails.
func ParseStream(stdout []byte) *Stream {
	s := &Stream{}
	var text strings.Builder
	s.Events, s.Skipped = clikit.Lines(stdout, func(typ string, line []byte) {
		var ev struct {
			SessionID string `json:"sessionID"`
			Part      struct {
				Text   string `json:"text"`
				Reason string `json:"reason"`
				Tokens struct {
					Input     int64 `json:"input"`
					Output    int64 `json:"output"`
					Reasoning int64 `json:"reasoning"`
					Cache     struct {
						Read  int64 `json:"read"`
						Write int64 `json:"write"`
					} `json:"cache"`
				} `json:"tokens"`
				Cost float64 `json:"cost"`
			} `json:"part"`
			Error *struct {
				Name string `json:"name"`
				Data struct {
					Message string `json:"message"`
				} `json:"data"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		switch {
		case s.SessionID == "":
			s.SessionID = ev.SessionID
		case ev.SessionID != "" && ev.SessionID != s.SessionID && s.OtherSessionID == "":
			s.OtherSessionID = ev.SessionID
		}
		switch typ {
		case "step_start":
			text.Reset()
		case "text":
			text.WriteString(ev.Part.Text)
		case "step_finish":
			s.Steps++
			s.LastReason = ev.Part.Reason
			t := ev.Part.Tokens
			s.InputTokens += t.Input + t.Cache.Read + t.Cache.Write
			s.OutputTokens += t.Output + t.Reasoning
			s.CostUSD += ev.Part.Cost
		case "error":
			msg := "error"
			if ev.Error != nil {
				msg = ev.Error.Name + ": " + ev.Error.Data.Message
			}
			s.Errors = append(s.Errors, msg)
		}
	})
	s.FinalText = text.String()
	return s
}
