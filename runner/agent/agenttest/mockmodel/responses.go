package mockmodel

import (
	"net/http"
)

// The OpenAI Responses API as Codex calls it (base URL Server.URL+"/v1", given to Codex as a
// custom provider with wire_api="responses"):
//
//   - POST /v1/responses: with "stream": true (Codex always streams), the SSE sequence
//     response.created, response.in_progress, response.output_item.added,
//     response.content_part.added, response.output_text.delta, response.output_text.done,
//     response.content_part.done, response.output_item.done (one assistant message),
//     response.completed (with usage); otherwise one JSON response object. The text is
//     Reply(body).
//
// The API key is not checked.
func init() {
	register("POST /v1/responses", openaiResponses)
}

func openaiResponses(w http.ResponseWriter, r *http.Request) {
	body, req, err := readRequest(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	if req.Model == "" {
		req.Model = "gpt-mock"
	}
	text := Reply(body)
	part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	item := map[string]any{"id": "msg_mock", "type": "message", "role": "assistant",
		"status": "completed", "content": []any{part}}
	usage := map[string]any{
		"input_tokens": InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": InputTokens + OutputTokens,
	}
	resp := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": "resp_mock", "object": "response", "created_at": 1764403200,
			"model": req.Model, "status": status, "output": output, "usage": usage}
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp("completed", []any{item}, usage))
		return
	}
	s := newSSE(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		s.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []any{}, nil)})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", []any{}, nil)})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}})
	ev("response.content_part.added", map[string]any{"item_id": "msg_mock", "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	ev("response.output_text.delta", map[string]any{"item_id": "msg_mock", "output_index": 0, "content_index": 0,
		"delta": text})
	ev("response.output_text.done", map[string]any{"item_id": "msg_mock", "output_index": 0, "content_index": 0,
		"text": text})
	ev("response.content_part.done", map[string]any{"item_id": "msg_mock", "output_index": 0, "content_index": 0,
		"part": part})
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": resp("completed", []any{item}, usage)})
}
