package claudecode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
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
	Subtype        string   `json:"subtype"`
	IsError        bool     `json:"is_error"`
	NumTurns       int      `json:"num_turns"`
	Result         string   `json:"result"`
	SessionID      string   `json:"session_id"`
	TotalCostUSD   float64  `json:"total_cost_usd"` // cumulative for the session after a resume
	Usage          Usage    `json:"usage"`
	Errors         []string `json:"errors,omitempty"`
	TerminalReason string   `json:"terminal_reason,omitempty"`
}

// Usage is result.usage: token counts of this run.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
}

// ParseStream reads stream-json output. Lines that are not JSON objects (noise, truncated
// tails) are counted and skipped; it never fails.
func ParseStream(stdout []byte) *Stream {
	s := &Stream{}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var head struct {
			Type      string `json:"type"`
			Subtype   string `json:"subtype"`
			SessionID string `json:"session_id"`
			Model     string `json:"model"`
			Version   string `json:"claude_code_version"`
		}
		if line[0] != '{' || json.Unmarshal(line, &head) != nil {
			s.Skipped++
			continue
		}
		s.Events++
		switch head.Type {
		case "system":
			if head.Subtype == "init" {
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
	}
	return s
}

// ResumeFailed reports whether the final result says the requested session does not exist.
func (s *Stream) ResumeFailed() bool {
	if s.Final == nil {
		return false
	}
	for _, e := range s.Final.Errors {
		if strings.Contains(e, resumeMissText) {
			return true
		}
	}
	return strings.Contains(s.Final.Result, resumeMissText)
}
