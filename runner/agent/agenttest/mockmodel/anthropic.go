package mockmodel

import (
	"net/http"
)

// The Anthropic Messages API as Claude Code calls it (base URL Server.URL, set as
// ANTHROPIC_BASE_URL):
//
//   - POST /v1/messages: with "stream": true (Claude Code's default), the SSE sequence
//     message_start, content_block_start, ping, content_block_delta (one text_delta),
//     content_block_stop, message_delta (stop_reason end_turn, usage), message_stop; otherwise
//     one JSON message. The text is Reply(body).
//   - POST /v1/messages/count_tokens: {"input_tokens": InputTokens}.
//
// The API key is not checked. Claude Code 2.1.197 also sends HEAD / and 2.1.332 HEAD
// /api/hello at start; the 404 they get is enough.
func init() {
	register("POST /v1/messages", anthropicMessages)
	register("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": InputTokens})
	})
}

func anthropicMessages(w http.ResponseWriter, r *http.Request) {
	body, req, err := readRequest(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error",
			"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	if req.Model == "" {
		req.Model = "claude-mock"
	}
	text := Reply(body)
	usage := map[string]any{"input_tokens": InputTokens, "output_tokens": OutputTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": "msg_mock", "type": "message", "role": "assistant", "model": req.Model,
			"content":     []any{map[string]any{"type": "text", "text": text}},
			"stop_reason": "end_turn", "stop_sequence": nil, "usage": usage,
		})
		return
	}
	s := newSSE(w)
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": InputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	s.event("ping", map[string]any{"type": "ping"})
	s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": text}})
	s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": OutputTokens}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
