package claudecode

import (
	"encoding/json"
	"strings"

	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
)

// resumeMissText is how Claude Code reports an unknown --resume id, in stderr and in the
// stream's final result.errors (§1 Failure detection).
const resumeMissText = "No conversation found with session ID"

// Stream is what ParseStream extracts from `--output-format stream-json` output (JSONL, one
// event per line; event types system/init, assistant, user, result — §1 Output).
type Stream struct {
	// SessionID is from the system/init event, else from the result event.
	SessionID string `json:"session_id"`
	// Model and Version are from system/init (model, claude_code_version).
	Model   string `json:"model,omitempty"`
	Version string `json:"version,omitempty"`
	// Final is the last result event; nil if the stream has none.
	Final *ResultEvent `json:"final,omitempty"`
	// Events counts the JSON lines; Skipped the lines that were not JSON objects.
	Events  int `json:"events"`
	Skipped int `json:"skipped,omitempty"`
}

// ResultEvent is the final `{"type":"result",…}` event (§1 Output). Subtype is one of success,
// error_max_turns, error_during_execution, error_max_budget_usd,
// error_max_structured_output_retries.
type ResultEvent struct {
	Subtype      string  `json:"subtype"`
	IsError      bool    `json:"is_error"`
	NumTurns     int     `json:"num_turns"`
	Result       string  `json:"result"`
	SessionID    string  `json:"session_id"`
	TotalCostUSD float64 `json:"total_cost_usd"` // USD, cumulative for the session after a resume
	Usage        Usage   `json:"usage"`
	// ModelUsage is per model (model id → counters), cumulative for the session after a resume
	// (§1 Output "Cost after resume").
	ModelUsage     map[string]ModelUsage `json:"modelUsage,omitempty"`
	Errors         []string              `json:"errors,omitempty"`
	TerminalReason string                `json:"terminal_reason,omitempty"`
}

// Usage is result.usage: token counts of this run only (§1 Output).
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
}

// ModelUsage is one entry of result.modelUsage (spec/agents.md §1 Output shows costUSD; the token fields
// are named as in the Claude Agent SDK's ModelUsage type).
type ModelUsage struct {
	InputTokens              int64   `json:"inputTokens,omitempty"`
	OutputTokens             int64   `json:"outputTokens,omitempty"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens,omitempty"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens,omitempty"`
	CostUSD                  float64 `json:"costUSD,omitempty"`
}

// Tokens returns input tokens (including cache reads and writes) and output tokens: summed over
// ModelUsage (session totals after a resume) when it has token counts, else from Usage.
func (e *ResultEvent) Tokens() (in, out int64) {
	for _, m := range e.ModelUsage {
		in += m.InputTokens + m.CacheReadInputTokens + m.CacheCreationInputTokens
		out += m.OutputTokens
	}
	if in != 0 || out != 0 {
		return in, out
	}
	u := e.Usage
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, u.OutputTokens
}

// ParseStream reads stream-json output. Lines that are not JSON objects (noise, truncated
// tails) are counted and skipped; it never fails.
func ParseStream(stdout []byte) *Stream {
	s := &Stream{}
	s.Events, s.Skipped = clikit.Lines(stdout, func(typ string, line []byte) {
		switch typ {
		case "system":
			var head struct {
				Subtype   string `json:"subtype"`
				SessionID string `json:"session_id"`
				Model     string `json:"model"`
				Version   string `json:"claude_code_version"`
			}
			if json.Unmarshal(line, &head) == nil && head.Subtype == "init" {
				s.SessionID, s.Model, s.Version = head.SessionID, head.Model, head.Version
			}
		case "result":
			var ev ResultEvent
			if json.Unmarshal(line, &ev) == nil {
				s.Final = &ev
				if s.SessionID == "" {
					s.SessionID = ev.SessionID
				}
			}
		}
	})
	return s
}

// ResumeFailed reports whether the final result says the requested session does not exist: a
// final event that is an error and names the missing conversation. A successful final event
// never says so, whatever its text (the model's answer may quote the message).
func (s *Stream) ResumeFailed() bool {
	if s.Final == nil || !s.Final.IsError {
		return false
	}
	for _, e := range s.Final.Errors {
		if strings.Contains(e, resumeMissText) {
			return true
		}
	}
	return strings.Contains(s.Final.Result, resumeMissText)
}
