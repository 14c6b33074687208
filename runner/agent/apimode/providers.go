package apimode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// conversation is one run's exchange with a provider: the messages so far in the provider's
// own types.
type conversation interface {
	// next sends the conversation with the reply bounded to maxOut tokens and returns the
	// model's reply, appended to it (nothing is appended when the call fails).
	next(ctx context.Context, maxOut int64) (reply, error)
	// answer appends the results of the reply's tool calls, in the order of the calls.
	answer(results []toolResult)
}

// reply is one model turn: its text, the tools it calls and the provider's usage of it.
type reply struct {
	text     string
	calls    []toolCall
	in, out  int64
	stop     string // the provider's stop or finish reason
	truncate bool   // the reply was cut at the output token limit
}

type toolCall struct {
	id, name string
	args     json.RawMessage
}

type toolResult struct {
	id, content string
	isError     bool
}

// anthropicConv is a conversation on the Messages API (POST /v1/messages), non-streaming.
type anthropicConv struct {
	client anthropic.Client
	params anthropic.MessageNewParams
	key    string // removed from the provider's error messages (providerError)
}

func newAnthropic(cfg Config, model, system, prompt string, tools []ToolSpec) *anthropicConv {
	c := &anthropicConv{client: anthropic.NewClient(anthropicOptions(cfg)...), key: cfg.APIKey}
	var ts []anthropic.ToolUnionParam
	for _, t := range tools {
		ts = append(ts, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: t.Name,
			Description: anthropic.String(t.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: t.Properties, Required: t.Required}}})
	}
	c.params = anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: cfg.MaxOutputTokens,
		System:   []anthropic.TextBlockParam{{Text: system}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools:    ts}
	return c
}

// anthropicOptions are the client options of cfg: key, base URL, no retries of the SDK's own
// (Agent.callWithRetry retries, waiting what the provider asks) and the HTTP client. The SDK's
// environment variables (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL) are not
// read: Alfred's own environment never decides where a key goes.
func anthropicOptions(cfg Config) []aoption.RequestOption {
	opts := []aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithAPIKey(cfg.APIKey),
		aoption.WithMaxRetries(0)}
	if cfg.BaseURL != "" {
		opts = append(opts, aoption.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, aoption.WithHTTPClient(cfg.HTTPClient))
	}
	return opts
}

func (c *anthropicConv) next(ctx context.Context, maxOut int64) (reply, error) {
	c.params.MaxTokens = maxOut
	var res *http.Response
	msg, err := c.client.Messages.New(ctx, c.params, aoption.WithResponseInto(&res))
	if err != nil {
		return reply{}, providerError("Anthropic", c.key, statusOf(res, err))
	}
	c.params.Messages = append(c.params.Messages, msg.ToParam())
	u := msg.Usage
	r := reply{in: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, out: u.OutputTokens,
		stop: string(msg.StopReason), truncate: msg.StopReason == anthropic.StopReasonMaxTokens}
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			r.calls = append(r.calls, toolCall{id: b.ID, name: b.Name, args: b.Input})
		}
	}
	r.text = strings.Join(text, "\n")
	return r, nil
}

func (c *anthropicConv) answer(results []toolResult) {
	blocks := make([]anthropic.ContentBlockParamUnion, 0, len(results))
	for _, r := range results {
		blocks = append(blocks, anthropic.NewToolResultBlock(r.id, r.content, r.isError))
	}
	c.params.Messages = append(c.params.Messages, anthropic.NewUserMessage(blocks...))
}

// openaiConv is a conversation on the Chat Completions API (POST /chat/completions under the
// base URL), non-streaming; OpenAI-compatible servers (local model servers) speak it too.
type openaiConv struct {
	client openai.Client // openaiClient's
	params openai.ChatCompletionNewParams
	key    string // removed from the provider's error messages (providerError)
}

func newOpenAI(cfg Config, model, system, prompt string, tools []ToolSpec) *openaiConv {
	c := &openaiConv{client: openaiClient(cfg), key: cfg.APIKey}
	var ts []openai.ChatCompletionToolUnionParam
	for _, t := range tools {
		schema := shared.FunctionParameters{"type": "object", "properties": t.Properties}
		if len(t.Required) > 0 {
			schema["required"] = t.Required
		}
		ts = append(ts, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: t.Name,
			Description: openai.String(t.Description), Parameters: schema}))
	}
	c.params = openai.ChatCompletionNewParams{Model: shared.ChatModel(model),
		MaxCompletionTokens: openai.Int(cfg.MaxOutputTokens),
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(prompt)},
		Tools:               ts}
	return c
}

// openaiBaseURL is OpenAI's own endpoint, set explicitly so that OPENAI_BASE_URL in Alfred's
// environment never redirects a key.
const openaiBaseURL = "https://api.openai.com/v1/"

// openaiOptions are the client options of cfg, as anthropicOptions: the key, the base URL and
// the HTTP client always set (an empty key too), nothing read from Alfred's environment.
func openaiOptions(cfg Config) []ooption.RequestOption {
	base := cfg.BaseURL
	if base == "" {
		base = openaiBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = openaiDefaultHTTP
	}
	return []ooption.RequestOption{ooption.WithHTTPClient(hc), ooption.WithAPIKey(cfg.APIKey), ooption.WithMaxRetries(0),
		ooption.WithBaseURL(base)}
}

// openaiDefaultHTTP is the HTTP client of an agent without Config.HTTPClient: as the SDK's own
// default (openai-go's default_http_client.go), http.DefaultTransport with a 10-minute
// ResponseHeaderTimeout, so a provider that takes the request and never answers frees the run.
var openaiDefaultHTTP = func() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}()

// openaiClient is the OpenAI client of cfg with the services Alfred calls (chat completions, the
// model list), built from openaiOptions alone. openai.NewClient would add what Alfred's own
// environment holds (OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_CUSTOM_HEADERS: a gateway's token,
// say) and send it to the agent's base_url, whoever runs it; the SDK offers no option to stop it.
func openaiClient(cfg Config) openai.Client {
	opts := openaiOptions(cfg)
	return openai.Client{Options: opts, Chat: openai.NewChatService(opts...), Models: openai.NewModelService(opts...)}
}

func (c *openaiConv) next(ctx context.Context, maxOut int64) (reply, error) {
	c.params.MaxCompletionTokens = openai.Int(maxOut)
	var raw *http.Response
	res, err := c.client.Chat.Completions.New(ctx, c.params, ooption.WithResponseInto(&raw))
	if err != nil {
		return reply{}, providerError("OpenAI", c.key, statusOf(raw, err))
	}
	r := reply{in: res.Usage.PromptTokens, out: res.Usage.CompletionTokens}
	if len(res.Choices) == 0 {
		return r, fmt.Errorf("the provider's answer holds no choice")
	}
	ch := res.Choices[0]
	c.params.Messages = append(c.params.Messages, ch.Message.ToParam())
	r.text, r.stop, r.truncate = ch.Message.Content, ch.FinishReason, ch.FinishReason == "length"
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			// Another kind of call (a custom tool's): none of Alfred's tools, answered as an
			// unknown tool, since the API refuses a conversation with a call left unanswered.
			r.calls = append(r.calls, toolCall{id: tc.ID, name: tc.Type + " tool call"})
			continue
		}
		r.calls = append(r.calls, toolCall{id: tc.ID, name: tc.Function.Name, args: json.RawMessage(tc.Function.Arguments)})
	}
	return r, nil
}

func (c *openaiConv) answer(results []toolResult) {
	for _, r := range results {
		content := r.content
		if r.isError {
			content = "error: " + content
		}
		c.params.Messages = append(c.params.Messages, openai.ToolMessage(content, r.id))
	}
}

// ProviderError is a provider's refusal of a request, after Alfred's retries: the HTTP
// status, the provider's error type and message (its own words), and how long it asked to
// wait (Retry-After, in seconds or an HTTP date; HasRetryAfter when it did). It never holds
// the key: the SDKs send it in a header, never in the URL or body.
type ProviderError struct {
	Provider      string
	Status        int
	Type          string
	Message       string
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// unreachableError is a model call that got no HTTP answer (a refused connection, a reset).
type unreachableError struct {
	provider string
	err      error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("the %s API could not be reached: %v", e.provider, e.err)
}
func (e *unreachableError) Unwrap() error { return e.err }

// Error words the refusal for the run's failure: what it means, then the provider's words.
func (e *ProviderError) Error() string {
	var what string
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		what = "refused the API key"
	case e.Status == http.StatusNotFound:
		what = "does not know the model or the endpoint"
	case e.Status == http.StatusTooManyRequests:
		what = "is rate limiting the key"
	case e.Status >= 500:
		what = "failed on its side"
	default:
		what = "refused the request"
	}
	if e.RetryAfter > 0 && (e.Status == http.StatusTooManyRequests || e.Status >= 500) {
		what += fmt.Sprintf(" (retry after %s)", e.RetryAfter) // a 503 or 529 may ask for a wait too
	}
	msg := fmt.Sprintf("the %s API %s: HTTP %d", e.Provider, what, e.Status)
	if e.Type != "" {
		msg += " " + e.Type
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// malformedError is a model call answered 200 with a body that is not an answer (cut JSON,
// not JSON): not retried, since the provider may have charged it and its usage cannot be read.
type malformedError struct {
	provider string
	err      error
}

func (e *malformedError) Error() string {
	return fmt.Sprintf("the %s API gave a malformed answer: %v", e.provider, e.err)
}
func (e *malformedError) Unwrap() error { return e.err }

// malformedAnswer reports whether err is the SDKs' failure to decode a successful answer: a
// JSON decoding error, or the wording of their shared request code (requestconfig's decode:
// "error parsing response json: …", and "expected destination type … that is not
// 'application/json'" for a body of another content type).
// statusError is an SDK error with the status of the answer it came with, when the SDK did not
// say it (a body it could not read): a cut body is a malformed answer only after a 2xx.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// statusOf wraps err with the status of res, when there was an answer.
func statusOf(res *http.Response, err error) error {
	if res == nil {
		return err
	}
	return &statusError{status: res.StatusCode, err: err}
}

func malformedAnswer(err error) bool {
	if se := (*statusError)(nil); errors.As(err, &se) && (se.status < 200 || se.status > 299) {
		return false // an error status whose body was cut: retried as the status says
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return true
	}
	s := err.Error()
	// "error reading response body": the SDKs' words for a 200 whose body was cut off (the
	// connection dropped after the status line): the provider did the work, and bills it.
	return strings.HasPrefix(s, "error parsing response json") || strings.HasPrefix(s, "expected destination type") ||
		strings.HasPrefix(s, "error reading response body")
}

// providerError maps an SDK error to a *ProviderError (an HTTP answer), a *malformedError (a
// successful answer that cannot be read) or keeps it (transport errors, ctx errors). key is
// removed from the provider's message before it is cut to its bound, so no part of it is left
// that a censor looking for the whole key would miss.
func providerError(provider, key string, err error) error {
	var ae *anthropic.Error
	var oe *openai.Error
	pe := &ProviderError{Provider: provider}
	var res *http.Response
	switch {
	case errors.As(err, &ae):
		pe.Status, res = ae.StatusCode, ae.Response
		var body struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		if json.Unmarshal([]byte(ae.RawJSON()), &body) == nil {
			pe.Type, pe.Message = body.Error.Type, body.Error.Message
		} else {
			pe.Message = strings.TrimSpace(ae.RawJSON())
		}
	case errors.As(err, &oe):
		pe.Status, res, pe.Type, pe.Message = oe.StatusCode, oe.Response, oe.Type, oe.Message
		if pe.Message == "" {
			pe.Message = strings.TrimSpace(oe.RawJSON())
		}
	default:
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the %s API call ended: %w", provider, err)
		}
		if malformedAnswer(err) {
			return &malformedError{provider: provider, err: err}
		}
		return &unreachableError{provider: provider, err: err}
	}
	if key != "" {
		pe.Message = strings.ReplaceAll(pe.Message, key, "[redacted]")
	}
	if len(pe.Message) > 500 {
		pe.Message = pe.Message[:500] + "…"
	}
	if res != nil {
		pe.RetryAfter, pe.HasRetryAfter = retryAfter(res.Header.Get("Retry-After"), time.Now())
	}
	return pe
}

// retryAfter reads a Retry-After value, seconds or an HTTP date (RFC 9110 §10.2.3), as the
// wait from now; ok false when there is none or it cannot be read. A date in the past is 0.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	const longest = 365 * 24 * 3600 // seconds: a wait no bound honours
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, longest)) * time.Second, true
	} else if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
		return longest * time.Second, true // more seconds than an int64 holds
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
