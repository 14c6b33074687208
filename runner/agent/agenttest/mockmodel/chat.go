package mockmodel

// OpenAI-compatible Chat Completions, POST /v1/chat/completions, as opencode 1.18.33 calls it
// through a custom provider ("npm": "@ai-sdk/openai-compatible", options.baseURL = URL+"/v1";
// see OpencodeProviderConfig). Streaming requests ("stream": true) get SSE chunks
// ("data: <chunk>\n\n", no event names): the whole reply in one delta, a finish chunk, a usage
// chunk and "data: [DONE]"; other requests one chat.completion object. The bearer key is not
// checked.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

func init() {
	register("POST /v1/chat/completions", chatHandler)
}

// ChatHandler serves POST /v1/chat/completions on its own (for a mux that is not New's).
func ChatHandler() http.Handler { return http.HandlerFunc(chatHandler) }

// ChatModel is the model id the opencode provider config declares.
const ChatModel = "mock-model"

// OpencodeProviderConfig is an opencode.json (OPENCODE_CONFIG_CONTENT) declaring provider
// "mock" with model ChatModel, served by this mock's chat completions at baseURL (URL+"/v1");
// the key is read from the environment variable keyEnv. Select it with -m "mock/mock-model".
func OpencodeProviderConfig(baseURL, keyEnv string) string {
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{
			"mock": map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Mock",
				"options": map[string]any{
					"baseURL": baseURL,
					"apiKey":  "{env:" + keyEnv + "}",
				},
				"models": map[string]any{ChatModel: map[string]any{"name": "Mock model"}},
			},
		},
	}
	b, _ := json.Marshal(cfg)
	return string(b)
}

func chatHandler(w http.ResponseWriter, r *http.Request) {
	body, req, err := readRequest(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"type": "invalid_request_error", "message": "mockmodel: " + err.Error()}})
		return
	}
	text := Reply(body)
	usage := map[string]any{
		"prompt_tokens": InputTokens, "completion_tokens": OutputTokens, "total_tokens": InputTokens + OutputTokens,
	}
	const id, created = "chatcmpl-mock", 1767225600
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{
				"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text},
			}},
			"usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	chunk := func(choices []any, usage any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": choices}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": text}, "finish_reason": nil}}, nil)
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}, nil)
	chunk([]any{}, usage)
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}
