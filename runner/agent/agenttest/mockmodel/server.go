// Package mockmodel is a loopback mock of the model APIs the coding-agent CLIs call, for tests
// that run a real CLI (runner/agent/realcli) without a real model.
//
// Every protocol answers with plain text only (no tool calls):
//
//	MOCK reply; marks seen: MARK-ALPHA,MARK-BETA
//
// listing, in order of first appearance and without duplicates, the MARK-… tokens found
// anywhere in the request body. A resumed run whose CLI sent the earlier history back therefore
// names the first run's mark (spec/agents.md uses the same convention). Token usage is fixed
// (InputTokens, OutputTokens per request) so recorded streams are stable.
//
// Protocols live in one file each and register their routes from init with register:
// anthropic.go (Anthropic Messages, POST /v1/messages), responses.go (OpenAI Responses,
// POST /v1/responses), and the others of this package (gemini.go, chat.go) the same way; a new
// protocol needs no change here. Everything else answers 404 with a JSON error body (the CLIs
// tolerate that for their start-up probes, e.g. Claude Code's HEAD / and HEAD /api/hello). All requests are
// recorded (Requests) so a test can show what a CLI called.
package mockmodel

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Fixed usage reported for every model request.
const (
	InputTokens  = 120
	OutputTokens = 9
)

// ReplyPrefix starts every reply text.
const ReplyPrefix = "MOCK reply; marks seen: "

// Server is a running mock; it is closed by the test's cleanup.
type Server struct {
	// URL is the server's base URL without a path, e.g. "http://127.0.0.1:41234". The
	// Anthropic base URL (ANTHROPIC_BASE_URL) is URL; the OpenAI one (…/v1) is URL+"/v1".
	URL string

	srv  *httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// Request is one recorded request.
type Request struct {
	Method string
	Path   string // URL path, without the query
	Status int    // status code answered
	Body   []byte
}

// routes are added by the protocol files' init functions (see register).
var routes = map[string]http.HandlerFunc{}

// register adds a route (an http.ServeMux pattern such as "POST /v1/messages"); called from
// init in each protocol's file.
func register(pattern string, h http.HandlerFunc) { routes[pattern] = h }

// New starts a mock on 127.0.0.1 serving every registered protocol, closed at t's cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	mux := http.NewServeMux()
	for p, h := range routes {
		mux.HandleFunc(p, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"type": "not_found_error", "message": "mockmodel: no route for " + r.Method + " " + r.URL.Path}})
	})
	s.srv = httptest.NewServer(s.record(mux)) // httptest listens on 127.0.0.1
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// record stores each request (method, path, body, answered status) before serving it.
func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Status: sw.status, Body: body})
		s.mu.Unlock()
	})
}

// Requests returns the requests served so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reset forgets the recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

var markRE = regexp.MustCompile(`MARK-[A-Z0-9]+`)

// Marks returns the distinct MARK-… tokens (MARK- then upper-case letters and digits) in body,
// in order of first appearance.
func Marks(body []byte) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range markRE.FindAllString(string(body), -1) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// Reply is the reply text for a request body: ReplyPrefix + its marks joined with ",".
func Reply(body []byte) string { return ReplyPrefix + strings.Join(Marks(body), ",") }

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes Server-Sent Events: each event as "event: <name>\ndata: <json>\n\n", flushed.
type sse struct{ w http.ResponseWriter }

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

func (s sse) event(name string, data any) {
	b, _ := json.Marshal(data)
	_, _ = io.WriteString(s.w, "event: "+name+"\ndata: "+string(b)+"\n\n")
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
