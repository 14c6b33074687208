// Package apimodetest holds httptest stand-ins of the two model provider APIs API mode talks
// to: Anthropic's Messages API (POST /v1/messages, GET /v1/models/{id}) and OpenAI's Chat
// Completions (POST /v1/chat/completions, GET /v1/models), non-streaming, in the providers'
// request and response shapes: content blocks with tool_use and tool_result (Anthropic),
// messages with tool_calls and role "tool" (OpenAI), usage, and the providers' error bodies
// for 401, 404, 429 (with retry-after) and 5xx. What the model answers is decided by a Brain
// the test gives, from the conversation the stand-in received.
package apimodetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Exchange is the conversation a stand-in received in one model call, the same for both APIs.
type Exchange struct {
	// Model is the requested model; System the system prompt; Prompt the first user message.
	Model, System, Prompt string
	// Tools are the names of the tools offered.
	Tools []string
	// Results are the tool results sent so far, oldest first.
	Results []Result
	// Turn is 1 for the first call of a run, 2 after one assistant reply, and so on.
	Turn int
	// MaxTokens is the bound of the reply the call asked for (max_tokens;
	// max_completion_tokens).
	MaxTokens int64
}

// Key returns the run key the prompt names ("analysis.functional"), "" if none.
func (e Exchange) Key() string {
	m := keyRE.FindStringSubmatch(e.Prompt)
	if m == nil {
		return ""
	}
	return m[1]
}

var keyRE = regexp.MustCompile(`## Your task \(([a-z_.]+)`)

// Result is one tool result of the conversation.
type Result struct {
	CallID, Content string
	IsError         bool
}

// Reply is what the model answers: text, tool calls, and the usage to report (0: a count
// derived from the sizes of the request and the reply).
type Reply struct {
	Text                      string
	Calls                     []Call
	InputTokens, OutputTokens int64
}

// Call is one tool call of a Reply; Args is encoded as the call's JSON arguments.
type Call struct {
	Name string
	Args any
}

// Brain decides the model's reply.
type Brain func(Exchange) Reply

// Failure is an error answer: the HTTP status, the provider's error type and message, and
// the Retry-After header ("" for none).
type Failure struct {
	Status     int
	Type       string
	Message    string
	RetryAfter string
}

// Server is a provider stand-in.
type Server struct {
	*httptest.Server
	// Key is the API key the stand-in accepts; Model the one model it knows.
	Key, Model string

	provider string
	brain    Brain
	mu       sync.Mutex
	calls    int
	fail     []Failure
}

// BaseURL is what the adapter's base_url is set to.
func (s *Server) BaseURL() string {
	if s.provider == "openai" {
		return s.URL + "/v1/"
	}
	return s.URL + "/"
}

// Calls counts the model calls received (POST), failed ones included.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// FailNext makes the next n model calls answer f.
func (s *Server) FailNext(n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fail = append(s.fail, f)
	}
}

// SetBrain replaces the brain.
func (s *Server) SetBrain(b Brain) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.brain = b
}

func (s *Server) count() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
}

func (s *Server) take() (Brain, *Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fail) > 0 {
		f := s.fail[0]
		s.fail = s.fail[1:]
		return s.brain, &f
	}
	return s.brain, nil
}

// NewAnthropic starts a stand-in of Anthropic's API accepting key and knowing model.
func NewAnthropic(t testing.TB, key, model string, brain Brain) *Server {
	s := &Server{Key: key, Model: model, provider: "anthropic", brain: brain}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.anthropicMessages)
	mux.HandleFunc("GET /v1/models/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !s.anthropicAuth(w, r) {
			return
		}
		if r.PathValue("id") != s.Model {
			anthropicError(w, Failure{Status: 404, Type: "not_found_error", Message: "model: " + r.PathValue("id")})
			return
		}
		writeJSON(w, 200, map[string]any{"type": "model", "id": s.Model, "display_name": s.Model, "created_at": "2025-09-29T00:00:00Z"})
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *Server) anthropicAuth(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("X-Api-Key") != s.Key || r.Header.Get("Anthropic-Version") == "" {
		anthropicError(w, Failure{Status: 401, Type: "authentication_error", Message: "invalid x-api-key"})
		return false
	}
	return true
}

func anthropicError(w http.ResponseWriter, f Failure) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	w.Header().Set("Request-Id", "req_011standin")
	writeJSON(w, f.Status, map[string]any{"type": "error", "error": map[string]any{"type": f.Type, "message": f.Message},
		"request_id": "req_011standin"})
}

// anthropicBlock is a content block of a Messages request or response.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// blocks decodes a content that is a string or a list of blocks.
func blocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

func textOf(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	s.count()
	body, _ := io.ReadAll(r.Body)
	if !s.anthropicAuth(w, r) {
		return
	}
	brain, fail := s.take()
	if fail != nil {
		anthropicError(w, *fail)
		return
	}
	var req struct {
		Model     string          `json:"model"`
		MaxTokens int64           `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.MaxTokens <= 0 || len(req.Messages) == 0 {
		anthropicError(w, Failure{Status: 400, Type: "invalid_request_error", Message: "messages and max_tokens are required"})
		return
	}
	if req.Model != s.Model {
		anthropicError(w, Failure{Status: 404, Type: "not_found_error", Message: "model: " + req.Model})
		return
	}
	ex := Exchange{Model: req.Model, System: textOf(req.System), Prompt: textOf(req.Messages[0].Content), Turn: 1,
		MaxTokens: req.MaxTokens}
	for _, t := range req.Tools {
		ex.Tools = append(ex.Tools, t.Name)
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			ex.Turn++
		}
		for _, b := range blocks(m.Content) {
			if b.Type == "tool_result" {
				ex.Results = append(ex.Results, Result{CallID: b.ToolUseID, Content: textOf(b.Content), IsError: b.IsError})
			}
		}
	}
	rep := brain(ex)
	var content []anthropicBlock
	if rep.Text != "" {
		content = append(content, anthropicBlock{Type: "text", Text: rep.Text})
	}
	for i, c := range rep.Calls {
		args, _ := json.Marshal(c.Args)
		content = append(content, anthropicBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_%02d_%02d", ex.Turn, i), Name: c.Name, Input: args})
	}
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	in, out := usage(rep, len(body))
	writeJSON(w, 200, map[string]any{"id": fmt.Sprintf("msg_standin_%d", ex.Turn), "type": "message", "role": "assistant",
		"model": req.Model, "content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
}

// usage is the reply's usage, or one derived from the sizes (about four bytes a token).
func usage(rep Reply, requestBytes int) (in, out int64) {
	in, out = rep.InputTokens, rep.OutputTokens
	if in == 0 {
		in = int64(requestBytes/4 + 1)
	}
	if out == 0 {
		out = int64(len(rep.Text)/4 + 10*len(rep.Calls) + 1)
	}
	return in, out
}

// NewOpenAI starts a stand-in of OpenAI's API accepting key and knowing model.
func NewOpenAI(t testing.TB, key, model string, brain Brain) *Server {
	s := &Server{Key: key, Model: model, provider: "openai", brain: brain}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.openaiCompletions)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		if !s.openaiAuth(w, r) {
			return
		}
		writeJSON(w, 200, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": s.Model, "object": "model", "created": 1686935002, "owned_by": "standin"}}})
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// openaiAuth checks the bearer key. Unlike the real API, which masks most of a wrong key in
// its message, the stand-in echoes it whole, so that a test sees the censor at work.
func (s *Server) openaiAuth(w http.ResponseWriter, r *http.Request) bool {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if got != s.Key {
		openaiError(w, Failure{Status: 401, Type: "invalid_request_error",
			Message: "Incorrect API key provided: " + got + ". You can find your API key at https://platform.openai.com/account/api-keys."})
		return false
	}
	return true
}

func openaiError(w http.ResponseWriter, f Failure) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	code := map[int]string{401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}[f.Status]
	writeJSON(w, f.Status, map[string]any{"error": map[string]any{"message": f.Message, "type": f.Type, "param": nil, "code": code}})
}

func (s *Server) openaiCompletions(w http.ResponseWriter, r *http.Request) {
	s.count()
	body, _ := io.ReadAll(r.Body)
	if !s.openaiAuth(w, r) {
		return
	}
	brain, fail := s.take()
	if fail != nil {
		openaiError(w, *fail)
		return
	}
	var req struct {
		Model               string `json:"model"`
		MaxCompletionTokens int64  `json:"max_completion_tokens"`
		Messages            []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		openaiError(w, Failure{Status: 400, Type: "invalid_request_error", Message: "messages is required"})
		return
	}
	if req.Model != s.Model {
		openaiError(w, Failure{Status: 404, Type: "invalid_request_error", Message: "The model `" + req.Model + "` does not exist or you do not have access to it."})
		return
	}
	ex := Exchange{Model: req.Model, Turn: 1, MaxTokens: req.MaxCompletionTokens}
	for _, t := range req.Tools {
		ex.Tools = append(ex.Tools, t.Function.Name)
	}
	for _, m := range req.Messages {
		text := textOf(m.Content)
		switch m.Role {
		case "system", "developer":
			ex.System = text
		case "user":
			if ex.Prompt == "" {
				ex.Prompt = text
			}
		case "assistant":
			ex.Turn++
		case "tool":
			ex.Results = append(ex.Results, Result{CallID: m.ToolCallID, Content: text, IsError: strings.HasPrefix(text, "error: ")})
		}
	}
	rep := brain(ex)
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if rep.Text != "" {
		msg["content"] = rep.Text
	}
	finish := "stop"
	if len(rep.Calls) > 0 {
		finish = "tool_calls"
		var calls []any
		for i, c := range rep.Calls {
			args, _ := json.Marshal(c.Args)
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%02d_%02d", ex.Turn, i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": string(args)}})
		}
		msg["tool_calls"] = calls
	}
	in, out := usage(rep, len(body))
	writeJSON(w, 200, map[string]any{"id": fmt.Sprintf("chatcmpl-standin%d", ex.Turn), "object": "chat.completion",
		"created": 1764633600, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Analyst is a Brain for whole lifecycles: on its first turn it lists the repository's root
// and reads path, then it answers finals[key] for the run key the prompt names (a result
// JSON object). A key without a final answer gets a text that is not JSON.
func Analyst(path string, finals map[string]string) Brain {
	return func(ex Exchange) Reply {
		if len(ex.Results) == 0 {
			return Reply{Calls: []Call{{Name: "list_dir", Args: map[string]any{"path": "."}},
				{Name: "read_file", Args: map[string]any{"path": path}}}}
		}
		if f, ok := finals[ex.Key()]; ok {
			return Reply{Text: f}
		}
		return Reply{Text: "no answer for " + ex.Key()}
	}
}
