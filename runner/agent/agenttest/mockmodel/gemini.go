package mockmodel

// Gemini API (generativelanguage v1beta), as Gemini CLI 0.61.0 calls it through @google/genai
// when GOOGLE_GEMINI_BASE_URL is the mock's URL (no path: the SDK appends /v1beta/…):
//
//	POST /v1beta/models/<model>:streamGenerateContent?alt=sse  (the agent turns)
//	POST /v1beta/models/<model>:generateContent                (side calls, e.g. JSON checks)
//	POST /v1beta/models/<model>:countTokens
//
// The key arrives as the x-goog-api-key header; it is not checked.

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

func init() {
	register("POST /v1beta/models/{call}", geminiHandler)
}

// GeminiHandler serves the Gemini API routes on its own (for a mux that is not New's).
func GeminiHandler() http.Handler { return http.HandlerFunc(geminiHandler) }

func geminiHandler(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(r.PathValue("call"), ":")
	if !ok {
		geminiError(w, http.StatusNotFound, "mockmodel: no method in "+r.URL.Path)
		return
	}
	body, _ := io.ReadAll(r.Body)
	switch method {
	case "countTokens":
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": InputTokens})
	case "generateContent":
		writeJSON(w, http.StatusOK, geminiResponse(model, Reply(body)))
	case "streamGenerateContent":
		// alt=sse: "data: <GenerateContentResponse>\n\n" per chunk, no event names.
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		b, _ := json.Marshal(geminiResponse(model, Reply(body)))
		_, _ = io.WriteString(w, "data: "+string(b)+"\r\n\r\n")
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	default:
		geminiError(w, http.StatusNotFound, "mockmodel: unknown Gemini method "+method)
	}
}

// geminiResponse is one GenerateContentResponse carrying the whole reply and the fixed usage.
func geminiResponse(model, text string) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{
			"promptTokenCount":     InputTokens,
			"candidatesTokenCount": OutputTokens,
			"totalTokenCount":      InputTokens + OutputTokens,
		},
		"modelVersion": model,
		"responseId":   "mock-response",
	}
}

func geminiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": "NOT_FOUND"}})
}
