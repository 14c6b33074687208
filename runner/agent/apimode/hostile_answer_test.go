package apimode_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/apimode"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
)

// rawProvider starts a server answering every request with answer (its requests' bodies kept
// in order), and an agent of kind on it.
func rawProvider(t *testing.T, kind string, answer func(n int, w http.ResponseWriter, body string)) (*apimode.Agent, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		answer(int(calls.Add(1)), w, string(b))
	}))
	t.Cleanup(srv.Close)
	base := srv.URL
	if kind == apimode.OpenAI {
		base += "/v1/"
	}
	a, err := apimode.New(apimode.Config{Kind: kind, Model: testModel, APIKey: testKey, BaseURL: base, MaxRetries: 2})
	require.NoError(t, err)
	a.SetWait(func(context.Context, time.Duration) error { return nil })
	return a, &calls
}

// A 200 whose body is not a whole answer (cut JSON, not JSON) is a malformed answer: the run
// fails at once, not retried as a provider that could not be reached (each retry may cost
// tokens nobody can count).
func TestMalformedProviderAnswerIsNotRetried(t *testing.T) {
	for _, kind := range []string{apimode.Anthropic, apimode.OpenAI} {
		for name, body := range map[string]string{"cut": `{"id":"msg_1","type":"message","content":[`, "not an object": `[1,2`,
			"connection dropped": ""} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				a, calls := rawProvider(t, kind, func(_ int, w http.ResponseWriter, _ string) {
					w.Header().Set("Content-Type", "application/json")
					if body == "" {
						// The 200 and part of the body, then the connection is gone (the
						// provider did the work, and bills it).
						w.Header().Set("Content-Length", "4000")
						w.WriteHeader(http.StatusOK)
						_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","content":[`)
						w.(http.Flusher).Flush()
						if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
							_ = conn.Close()
						}
						return
					}
					_, _ = io.WriteString(w, body)
				})
				_, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
				require.Error(t, err)
				assert.EqualValues(t, 1, calls.Load(), "not retried")
				assert.NotContains(t, err.Error(), "could not be reached")
				assert.Contains(t, err.Error(), "malformed")
			})
		}
	}
}

// A tool call of another type than function (OpenAI's custom tools) is answered as refused, as
// an unknown tool is: the next request holds an answer for every call the reply made, which the
// API requires.
func TestOpenAICustomToolCallIsAnswered(t *testing.T) {
	var second string
	a, calls := rawProvider(t, apimode.OpenAI, func(n int, w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"`+testModel+`","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[`+
				`{"id":"call_a","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}},`+
				`{"id":"call_b","type":"custom","custom":{"name":"shell","input":"rm -rf /"}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
			return
		}
		second = body
		_, _ = io.WriteString(w, `{"id":"c2","object":"chat.completion","created":1,"model":"`+testModel+`","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":`+
			jsonString(finalFunctional)+`}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
	})
	rep, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
	require.NoError(t, err)
	require.NotNil(t, rep.Result)
	assert.EqualValues(t, 2, calls.Load())
	assert.Contains(t, second, `"tool_call_id":"call_a"`)
	assert.Contains(t, second, `"tool_call_id":"call_b"`, "the custom call is answered")
}

// The log of a run is one line per turn and tool call: a tool name the model made up (with line
// breaks, of any length) cannot forge a line or fill the log.
func TestToolNameCannotForgeALogLine(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			name := "x\nresult: forged line\n" + strings.Repeat("A", 5000)
			srv := p.start(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
				if ex.Turn == 1 {
					return apimodetest.Reply{Calls: []apimodetest.Call{{Name: name, Args: map[string]any{}}}}
				}
				return apimodetest.Reply{Text: finalFunctional}
			})
			rep, err := newAgent(t, p, srv, nil).RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.NoError(t, err)
			for _, line := range strings.Split(rep.Log, "\n") {
				assert.False(t, strings.HasPrefix(strings.TrimSpace(line), "result: forged"), line[:min(len(line), 80)])
				assert.LessOrEqual(t, len(line), 600, line[:min(len(line), 80)])
			}
		})
	}
}

// A provider that repeats the key in a long error message: the message is cut to its bound
// only after the key is removed, so no part of the key is left for the censor to miss.
func TestKeyInALongProviderMessageIsRemovedBeforeTheCut(t *testing.T) {
	for _, kind := range []string{apimode.Anthropic, apimode.OpenAI} {
		for pad := 470; pad < 500; pad += 7 {
			a, _ := rawProvider(t, kind, func(_ int, w http.ResponseWriter, _ string) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":`+
					jsonString(strings.Repeat("p", pad)+" invalid key "+testKey+" given")+`}}`)
			})
			_, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.Error(t, err)
			for n := 8; n <= len(testKey); n++ {
				require.NotContains(t, err.Error(), testKey[:n], "pad %d", pad)
			}
		}
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// An error status whose body the connection cut (a 529 whose body never came whole) is the
// status's to judge, not a malformed answer: it is retried as the status says, on both SDKs.
func TestCutErrorAnswerIsRetriedAsItsStatus(t *testing.T) {
	for _, kind := range []string{apimode.Anthropic, apimode.OpenAI} {
		t.Run(kind, func(t *testing.T) {
			a, calls := rawProvider(t, kind, func(_ int, w http.ResponseWriter, _ string) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "4000")
				w.WriteHeader(529)
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error",`)
				w.(http.Flusher).Flush()
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					_ = conn.Close()
				}
			})
			_, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.Error(t, err)
			assert.EqualValues(t, 3, calls.Load(), "retried: two retries after the first call")
			assert.NotContains(t, err.Error(), "malformed")
		})
	}
}
