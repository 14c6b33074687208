package apimode_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/apimode"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
	"github.com/alfred-bot/alfred/runner/phase"
)

const (
	testKey   = "sk-standin-0123456789abcdef-key"
	testModel = "model-standin-1"
)

// provider is one of the two stand-ins with its adapter kind.
type provider struct {
	kind  string
	start func(t testing.TB, key, model string, b apimodetest.Brain) *apimodetest.Server
}

var providers = []provider{
	{apimode.Anthropic, apimodetest.NewAnthropic},
	{apimode.OpenAI, apimodetest.NewOpenAI},
}

// worktree lays out a small repository, a secret beside it (outside), and symbolic links that
// lead out of it.
func worktree(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	wt := filepath.Join(base, "wt")
	require.NoError(t, os.MkdirAll(filepath.Join(wt, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt, "README.md"), []byte("# Shop\nThe report exporter.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(wt, "src", "report.py"), []byte("def export():\n    return 'MARK-REPORT'\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+base+"/mirror\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(base, "secret.txt"), []byte("MARK-OUTSIDE-CONTENT\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(wt, "leak.txt")))
	require.NoError(t, os.Symlink(base, filepath.Join(wt, "up")))
	return wt
}

func newAgent(t *testing.T, p provider, srv *apimodetest.Server, mod func(*apimode.Config)) *apimode.Agent {
	t.Helper()
	cfg := apimode.Config{Kind: p.kind, Model: testModel, APIKey: testKey, BaseURL: srv.BaseURL(), MaxRetries: 1,
		Prices: map[string]apimode.Price{testModel: {InputUSDPerMTok: 3, OutputUSDPerMTok: 15}}}
	if mod != nil {
		mod(&cfg)
	}
	a, err := apimode.New(cfg)
	require.NoError(t, err)
	return a
}

func functional() phase.Input {
	return phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional, Key: "analysis.functional", Attempt: 1,
		Repo: "acme/shop", Issue: 12, Title: "Export the report as CSV", Description: "Please add a CSV export."}
}

const finalFunctional = `{"summary": "Analysed the export.", "understanding": "The exporter returns MARK-REPORT; add CSV.",
 "questions": [{"id": "q1", "title": "Which separator?", "options": [{"id": "a", "label": "comma"}, {"id": "b", "label": "semicolon"}], "default": "a"}]}`

func TestAnalysisReadsFilesThroughTools(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			var seen []apimodetest.Result
			srv := p.start(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
				if ex.Turn == 1 {
					assert.Contains(t, ex.Prompt, "Export the report as CSV")
					assert.Contains(t, ex.System, `"understanding"`)
					assert.ElementsMatch(t, []string{"list_dir", "read_file", "search_text"}, ex.Tools)
					return apimodetest.Reply{Calls: []apimodetest.Call{
						{Name: "list_dir", Args: map[string]any{"path": ""}},
						{Name: "read_file", Args: map[string]any{"path": "src/report.py"}},
						{Name: "search_text", Args: map[string]any{"query": "MARK-REPORT"}}},
						InputTokens: 1000, OutputTokens: 50}
				}
				seen = ex.Results
				return apimodetest.Reply{Text: finalFunctional, InputTokens: 2000, OutputTokens: 100}
			})
			a := newAgent(t, p, srv, nil)
			rep, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.NoError(t, err, rep.Log)
			require.NotNil(t, rep.Result)
			assert.Contains(t, rep.Result.Understanding, "MARK-REPORT")
			require.Len(t, rep.Result.Questions, 1)
			assert.Equal(t, 2, rep.Turns)
			require.Len(t, seen, 3)
			assert.Equal(t, "README.md 28\nleak.txt (symbolic link)\nsrc/\nup (symbolic link)\n", seen[0].Content, "the listing hides .git")
			assert.Contains(t, seen[1].Content, "return 'MARK-REPORT'")
			assert.Equal(t, "src/report.py:2:     return 'MARK-REPORT'\n", seen[2].Content)
			for _, r := range seen {
				assert.False(t, r.IsError, r.Content)
			}
			// Usage from the provider's fields; cost from the price table.
			assert.Equal(t, runner.Usage{InputTokens: 3000, OutputTokens: 150, CostUSD: (3000*3 + 150*15) / 1e6, Rated: true}, rep.Usage)
			assert.Equal(t, int64(3000), rep.Result.InputTokens)
			assert.InDelta(t, rep.Usage.CostUSD, rep.Result.CostUSD, 1e-12)
			assert.Contains(t, rep.Log, "read_file")
		})
	}
}

func TestUnknownPriceIsUnrated(t *testing.T) {
	srv := apimodetest.NewAnthropic(t, testKey, testModel, func(apimodetest.Exchange) apimodetest.Reply {
		return apimodetest.Reply{Text: finalFunctional}
	})
	a := newAgent(t, providers[0], srv, func(c *apimode.Config) { c.Prices = nil })
	rep, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
	require.NoError(t, err)
	assert.False(t, rep.Usage.Rated)
	assert.Zero(t, rep.Result.CostUSD)
	assert.Positive(t, rep.Usage.InputTokens)
}

// Every way out of the worktree is refused and told to the model as a tool error; nothing of
// the outside is read.
func TestToolCallOutsideWorktreeRefused(t *testing.T) {
	escapes := []apimodetest.Call{
		{Name: "read_file", Args: map[string]any{"path": "../secret.txt"}},
		{Name: "read_file", Args: map[string]any{"path": "src/../../secret.txt"}},
		{Name: "read_file", Args: map[string]any{"path": "/etc/passwd"}},
		{Name: "read_file", Args: map[string]any{"path": "leak.txt"}},
		{Name: "read_file", Args: map[string]any{"path": "up/secret.txt"}},
		{Name: "list_dir", Args: map[string]any{"path": "up"}},
		{Name: "list_dir", Args: map[string]any{"path": ".."}},
		{Name: "search_text", Args: map[string]any{"query": "MARK-OUTSIDE", "path": "up"}},
		{Name: "read_file", Args: map[string]any{"path": ".git"}},
		// git's own data through links the repository holds (self → ., g → .git).
		{Name: "read_file", Args: map[string]any{"path": "self/.git"}},
		{Name: "read_file", Args: map[string]any{"path": "g"}},
		{Name: "search_text", Args: map[string]any{"query": "gitdir", "path": "g"}},
		{Name: "read_file", Args: map[string]any{"path": "README.md", "offset": -1}},
		{Name: "write_file", Args: map[string]any{"path": "README.md"}},
	}
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			var seen []apimodetest.Result
			srv := p.start(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
				if ex.Turn == 1 {
					return apimodetest.Reply{Calls: escapes}
				}
				seen = ex.Results
				return apimodetest.Reply{Text: finalFunctional}
			})
			wt := worktree(t)
			require.NoError(t, os.Symlink(".", filepath.Join(wt, "self")))
			require.NoError(t, os.Symlink(".git", filepath.Join(wt, "g")))
			rep, err := newAgent(t, p, srv, nil).RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: wt})
			require.NoError(t, err, rep.Log)
			require.Len(t, seen, len(escapes))
			for i, r := range seen {
				assert.True(t, r.IsError, "call %d (%v) must be refused: %s", i, escapes[i].Args, r.Content)
				assert.Contains(t, r.Content, "refused", "call %d", i)
				assert.NotContains(t, r.Content, "gitdir:", "call %d", i)
				assert.NotContains(t, r.Content, "MARK-OUTSIDE-CONTENT")
				assert.NotContains(t, r.Content, "root:")
			}
			assert.NotContains(t, rep.Log, "MARK-OUTSIDE-CONTENT")
			// A search of the whole worktree does not follow the links out either.
			tools, err := apimode.OpenTools(wt, functional())
			require.NoError(t, err)
			defer tools.Close()
			out, err := tools.Call(context.Background(), "search_text", []byte(`{"query": "MARK-OUTSIDE"}`))
			require.NoError(t, err)
			assert.Equal(t, "(no match)", out)
		})
	}
}

func TestLoopBoundEndsTheRun(t *testing.T) {
	loop := func(apimodetest.Exchange) apimodetest.Reply {
		return apimodetest.Reply{Calls: []apimodetest.Call{{Name: "list_dir", Args: map[string]any{"path": "."}}}, InputTokens: 400, OutputTokens: 20}
	}
	for _, p := range providers {
		t.Run(p.kind+"/turns", func(t *testing.T) {
			srv := p.start(t, testKey, testModel, loop)
			rep, err := newAgent(t, p, srv, func(c *apimode.Config) { c.MaxTurns = 3 }).
				RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.ErrorIs(t, err, apimode.ErrBound)
			assert.EqualError(t, err, "the tool loop reached its bound: 3 turns without a final answer")
			assert.Nil(t, rep.Result)
			assert.Equal(t, 3, rep.Turns)
			assert.Equal(t, 3, srv.Calls())
			assert.Equal(t, int64(1200), rep.Usage.InputTokens, "a failed run's usage is kept")
			assert.Contains(t, rep.Log, "stopped: the tool loop reached its bound")
		})
		t.Run(p.kind+"/tokens", func(t *testing.T) {
			// The budget is checked before each turn: the fourth turn would send about 436 tokens
			// again, and 490 are left: less than 256 for its reply; it is not started.
			var maxTokens []int64
			srv := p.start(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
				maxTokens = append(maxTokens, ex.MaxTokens)
				return loop(ex)
			})
			rep, err := newAgent(t, p, srv, func(c *apimode.Config) { c.MaxTokens = 1750; c.MaxOutputTokens = 600 }).
				RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.ErrorIs(t, err, apimode.ErrBound)
			assert.Regexp(t, `^the tool loop reached its bound: the next turn needs about \d+ tokens of input and 256 for its reply; 490 of the run's 1750 remain$`, err.Error())
			assert.Equal(t, 3, rep.Turns)
			assert.Equal(t, 3, srv.Calls())
			assert.LessOrEqual(t, rep.Usage.InputTokens+rep.Usage.OutputTokens, int64(1750), "the run never overshoots")
			require.Len(t, maxTokens, 3)
			assert.Equal(t, int64(600), maxTokens[0], "the configured reply bound while it fits")
			assert.Less(t, maxTokens[2], int64(600), "the last turn's reply capped to what remains")
			assert.Positive(t, maxTokens[2])
		})
	}
}

// The first turn's estimate counts what every request carries besides the prompt: the tools'
// definitions. A budget that holds the prompt and a reply but not the definitions is not
// overshot by the first turn.
func TestFirstTurnEstimateCountsTheTools(t *testing.T) {
	system, prompt, err := apimode.Prompt(functional())
	require.NoError(t, err)
	budget := int64(len(system)+len(prompt))/4 + 1 + 256 + 10
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			srv := p.start(t, testKey, testModel, func(apimodetest.Exchange) apimodetest.Reply {
				return apimodetest.Reply{Calls: []apimodetest.Call{{Name: "list_dir", Args: map[string]any{"path": "."}}}}
			})
			rep, err := newAgent(t, p, srv, func(c *apimode.Config) { c.MaxTokens = budget; c.MaxOutputTokens = 256 }).
				RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.ErrorIs(t, err, apimode.ErrBound)
			assert.LessOrEqual(t, rep.Usage.InputTokens+rep.Usage.OutputTokens, budget, "the run never overshoots")
		})
	}
}

func TestMalformedAnswerFailsTheRun(t *testing.T) {
	cases := map[string]string{
		"prose":                 "I think the export is fine.",
		"missing understanding": `{"summary": "done"}`,
		"bad question":          `{"summary": "s", "understanding": "u", "questions": [{"id": "q1", "title": "t", "options": [{"id": "a", "label": "x"}], "default": "a"}]}`,
	}
	for _, p := range providers {
		for name, text := range cases {
			t.Run(p.kind+"/"+name, func(t *testing.T) {
				srv := p.start(t, testKey, testModel, func(apimodetest.Exchange) apimodetest.Reply { return apimodetest.Reply{Text: text} })
				rep, err := newAgent(t, p, srv, nil).RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
				require.ErrorIs(t, err, phase.ErrInvalidResult)
				assert.Nil(t, rep.Result)
				assert.Contains(t, rep.Log, "final answer refused")
			})
		}
	}
}

func TestProviderErrors(t *testing.T) {
	final := func(apimodetest.Exchange) apimodetest.Reply { return apimodetest.Reply{Text: finalFunctional} }
	for _, p := range providers {
		run := func(t *testing.T, srv *apimodetest.Server, mod func(*apimode.Config)) (runner.APIReport, error) {
			return newAgent(t, p, srv, mod).RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
		}
		t.Run(p.kind+"/401", func(t *testing.T) {
			srv := p.start(t, "sk-the-right-key-000000000", testModel, final)
			rep, err := run(t, srv, nil)
			var pe *apimode.ProviderError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, 401, pe.Status)
			assert.Contains(t, err.Error(), "refused the API key: HTTP 401")
			assert.Equal(t, 1, srv.Calls(), "a 401 is not retried")
			assert.Contains(t, rep.Log, "HTTP 401")
		})
		t.Run(p.kind+"/429", func(t *testing.T) {
			srv := p.start(t, testKey, testModel, final)
			srv.FailNext(5, apimodetest.Failure{Status: 429, Type: "rate_limit_error", Message: "Number of requests has exceeded your rate limit", RetryAfter: "0"})
			_, err := run(t, srv, nil)
			var pe *apimode.ProviderError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, 429, pe.Status)
			assert.Contains(t, err.Error(), "is rate limiting the key: HTTP 429 rate_limit_error: Number of requests has exceeded your rate limit")
			assert.Equal(t, 2, srv.Calls(), "one try and the SDK's one retry")
		})
		t.Run(p.kind+"/429 retry-after", func(t *testing.T) {
			srv := p.start(t, testKey, testModel, final)
			srv.FailNext(1, apimodetest.Failure{Status: 429, Type: "rate_limit_error", Message: "slow down", RetryAfter: "7"})
			_, err := run(t, srv, func(c *apimode.Config) { c.MaxRetries = -1 })
			var pe *apimode.ProviderError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, 7*time.Second, pe.RetryAfter)
			assert.Contains(t, err.Error(), "is rate limiting the key (retry after 7s): HTTP 429 rate_limit_error: slow down")
		})
		t.Run(p.kind+"/500-then-ok", func(t *testing.T) {
			srv := p.start(t, testKey, testModel, final)
			srv.FailNext(1, apimodetest.Failure{Status: 500, Type: "api_error", Message: "Internal server error"})
			rep, err := run(t, srv, nil)
			require.NoError(t, err)
			assert.NotNil(t, rep.Result)
			assert.Equal(t, 2, srv.Calls(), "the SDK retried the 500")
		})
		t.Run(p.kind+"/500", func(t *testing.T) {
			srv := p.start(t, testKey, testModel, final)
			srv.FailNext(5, apimodetest.Failure{Status: 503, Type: "overloaded_error", Message: "Overloaded"})
			_, err := run(t, srv, func(c *apimode.Config) { c.MaxRetries = -1 })
			assert.EqualError(t, err, "the "+map[string]string{apimode.Anthropic: "Anthropic", apimode.OpenAI: "OpenAI"}[p.kind]+
				" API failed on its side: HTTP 503 overloaded_error: Overloaded")
			assert.Equal(t, 1, srv.Calls(), "no retries when they are off")
		})
		t.Run(p.kind+"/529 retry-after", func(t *testing.T) {
			srv := p.start(t, testKey, testModel, final)
			srv.FailNext(1, apimodetest.Failure{Status: 529, Type: "overloaded_error", Message: "Overloaded", RetryAfter: "120"})
			_, err := run(t, srv, func(c *apimode.Config) { c.MaxRetries = -1 })
			assert.ErrorContains(t, err, "API failed on its side (retry after 2m0s): HTTP 529 overloaded_error: Overloaded",
				"the wait a 5xx asked for is in the failure")
		})
		t.Run(p.kind+"/unreachable", func(t *testing.T) {
			srv := p.start(t, testKey, testModel, final)
			srv.Close()
			_, err := run(t, srv, func(c *apimode.Config) { c.MaxRetries = -1 })
			require.Error(t, err)
			assert.Contains(t, err.Error(), "could not be reached")
		})
	}
}

func TestCheckSpendsNoTokens(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			srv := p.start(t, testKey, testModel, func(apimodetest.Exchange) apimodetest.Reply {
				t.Error("the check called the model")
				return apimodetest.Reply{}
			})
			require.NoError(t, newAgent(t, p, srv, nil).Check(context.Background()))
			err := newAgent(t, p, srv, func(c *apimode.Config) { c.Model = "no-such-model" }).Check(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "no-such-model")
			err = newAgent(t, p, srv, func(c *apimode.Config) { c.APIKey = "sk-wrong-key-0000000000000" }).Check(context.Background())
			var pe *apimode.ProviderError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, 401, pe.Status)
			assert.Zero(t, srv.Calls())
		})
	}
}

func TestReviewReadsTheDiff(t *testing.T) {
	in := phase.Input{Phase: phase.Review, Key: "review", Attempt: 1, Repo: "acme/shop", Title: "Add note column",
		Review: &phase.ReviewInput{MergeRequest: 2, Title: "Add note column", Target: "main",
			Diff: "diff --git a/report.py b/report.py\n+MARK-DIFF\n"}}
	srv := apimodetest.NewOpenAI(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
		if ex.Turn == 1 {
			assert.Contains(t, ex.Tools, "read_diff")
			return apimodetest.Reply{Calls: []apimodetest.Call{{Name: "read_diff", Args: map[string]any{}}}}
		}
		assert.Contains(t, ex.Results[0].Content, "MARK-DIFF")
		return apimodetest.Reply{Text: `{"summary": "Looks fine.", "review_comments": [{"path": "report.py", "line": 1, "body": "Name it."}]}`}
	})
	rep, err := newAgent(t, providers[1], srv, nil).RunAPI(context.Background(), runner.APIRun{Input: in, Worktree: worktree(t)})
	require.NoError(t, err, rep.Log)
	require.Len(t, rep.Result.ReviewComments, 1)
}

// A self-review in API mode reads the diff and the guidelines, and returns findings.
func TestSelfReviewReadsTheDiffAndGuidelines(t *testing.T) {
	in := phase.Input{Phase: phase.SelfReview, Key: "self_review", Attempt: 1, Repo: "acme/shop", Title: "Export as CSV",
		Plan: "Add MARK-PLAN.", Guidelines: []string{"CONTRIBUTING.md"},
		Review: &phase.ReviewInput{MergeRequest: 2, Title: "Export as CSV", Target: "main",
			Diff: "diff --git a/report.py b/report.py\n+MARK-DIFF\n"}}
	srv := apimodetest.NewAnthropic(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
		if ex.Turn == 1 {
			assert.Contains(t, ex.Tools, "read_diff")
			assert.Contains(t, ex.Prompt, "MARK-PLAN")
			assert.Contains(t, ex.Prompt, "- CONTRIBUTING.md")
			return apimodetest.Reply{Calls: []apimodetest.Call{{Name: "read_diff", Args: map[string]any{}}}}
		}
		assert.Contains(t, ex.Results[0].Content, "MARK-DIFF")
		return apimodetest.Reply{Text: `{"summary": "Read it.", "findings": [{"path": "report.py", "line": 1, "severity": "blocking", "text": "No test."}]}`}
	})
	rep, err := newAgent(t, providers[0], srv, nil).RunAPI(context.Background(), runner.APIRun{Input: in, Worktree: worktree(t)})
	require.NoError(t, err, rep.Log)
	require.Equal(t, []phase.Finding{{Path: "report.py", Line: 1, Severity: phase.SeverityBlocking, Text: "No test."}}, rep.Result.Findings)
}

func TestWritingPhaseRefused(t *testing.T) {
	srv := apimodetest.NewAnthropic(t, testKey, testModel, nil)
	_, err := newAgent(t, providers[0], srv, nil).RunAPI(context.Background(),
		runner.APIRun{Input: phase.Input{Phase: phase.Development, Key: "development", Attempt: 1}, Worktree: worktree(t)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read-only phases only")
	assert.Zero(t, srv.Calls())
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []apimode.Config{{Kind: "claude-api", Model: "m", APIKey: "k"}, {Kind: apimode.Anthropic, APIKey: "k"},
		{Kind: apimode.Anthropic, Model: "m"}, {Kind: apimode.OpenAI, Model: "m"}} {
		_, err := apimode.New(c)
		assert.Error(t, err, "%+v", c)
	}
	_, err := apimode.New(apimode.Config{Kind: apimode.OpenAI, Model: "llama", BaseURL: "http://127.0.0.1:11434/v1"})
	assert.NoError(t, err, "a local OpenAI-compatible server may take no key")
}

func TestAnswerPhase(t *testing.T) {
	in := phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Repo: "acme/shop", Issue: 4, Title: "Where is the export?",
		Comments: []string{"@alice: where does the report get exported?"}}
	srv := apimodetest.NewAnthropic(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
		if ex.Turn == 1 {
			assert.Contains(t, ex.Prompt, "where does the report get exported?")
			return apimodetest.Reply{Calls: []apimodetest.Call{{Name: "search_text", Args: map[string]any{"query": "def export"}}}}
		}
		return apimodetest.Reply{Text: "```json\n{\"summary\": \"Answered.\", \"answer\": \"In `" + strings.SplitN(ex.Results[0].Content, ":", 2)[0] + "`.\"}\n```"}
	})
	rep, err := newAgent(t, providers[0], srv, nil).RunAPI(context.Background(), runner.APIRun{Input: in, Worktree: worktree(t)})
	require.NoError(t, err, rep.Log)
	assert.Equal(t, "In `src/report.py`.", rep.Result.Answer)
}

// Alfred's own environment never redirects the key nor adds another credential: the SDKs'
// variables are overridden or not read.
func TestProviderEnvironmentIgnored(t *testing.T) {
	decoy := apimodetest.NewAnthropic(t, "sk-decoy-0000000000000000", testModel, nil)
	t.Setenv("ANTHROPIC_BASE_URL", decoy.BaseURL())
	t.Setenv("ANTHROPIC_API_KEY", "sk-decoy-0000000000000000")
	t.Setenv("OPENAI_BASE_URL", decoy.URL+"/v1/")
	t.Setenv("OPENAI_API_KEY", "sk-decoy-0000000000000000")
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			srv := p.start(t, testKey, testModel, func(apimodetest.Exchange) apimodetest.Reply { return apimodetest.Reply{Text: finalFunctional} })
			_, err := newAgent(t, p, srv, nil).RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.NoError(t, err)
			assert.Equal(t, 1, srv.Calls())
		})
	}
	// Without a base_url the provider's own endpoint is called (unreachable here), not the decoy.
	for _, p := range providers {
		a, err := apimode.New(apimode.Config{Kind: p.kind, Model: testModel, APIKey: testKey, MaxRetries: -1})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, _ = a.RunAPI(ctx, runner.APIRun{Input: functional(), Worktree: worktree(t)})
		cancel()
	}
	assert.Zero(t, decoy.Calls())
}

// A reply's tool calls beyond max_tool_calls are not run: each is answered as refused, and the
// run goes on.
func TestToolCallsPerReplyAreBounded(t *testing.T) {
	for _, p := range providers {
		t.Run(p.kind, func(t *testing.T) {
			var seen []apimodetest.Result
			srv := p.start(t, testKey, testModel, func(ex apimodetest.Exchange) apimodetest.Reply {
				if ex.Turn == 1 {
					calls := make([]apimodetest.Call, 30)
					for i := range calls {
						calls[i] = apimodetest.Call{Name: "read_file", Args: map[string]any{"path": "src/report.py"}}
					}
					return apimodetest.Reply{Calls: calls}
				}
				seen = ex.Results
				return apimodetest.Reply{Text: finalFunctional}
			})
			rep, err := newAgent(t, p, srv, func(c *apimode.Config) { c.MaxToolCalls = 5 }).
				RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.NoError(t, err, rep.Log)
			require.Len(t, seen, 30, "every call is answered")
			for i, r := range seen {
				if i < 5 {
					assert.False(t, r.IsError, "call %d runs", i)
					assert.Contains(t, r.Content, "MARK-REPORT")
					continue
				}
				assert.True(t, r.IsError, "call %d is refused", i)
				assert.Contains(t, r.Content, "refused: this reply made 30 tool calls, more than the 5 one reply may make")
			}
			assert.Contains(t, rep.Log, "25 tool calls beyond the 5 of one reply refused")
			assert.Equal(t, 5, strings.Count(rep.Log, "read_file"))
		})
	}
}

// A provider's Retry-After is waited before Alfred's retry, within max_retry_wait and the
// run's time limit; a longer one fails the call at once with the provider's words.
func TestRetryAfterIsHonoured(t *testing.T) {
	final := func(apimodetest.Exchange) apimodetest.Reply { return apimodetest.Reply{Text: finalFunctional} }
	for _, p := range providers {
		start := func(t *testing.T, retryAfter string) (*apimodetest.Server, *apimode.Agent, *[]time.Duration) {
			srv := p.start(t, testKey, testModel, final)
			srv.FailNext(1, apimodetest.Failure{Status: 429, Type: "rate_limit_error", Message: "slow down", RetryAfter: retryAfter})
			a := newAgent(t, p, srv, func(c *apimode.Config) { c.MaxRetries = 2 })
			var waits []time.Duration
			a.SetWait(func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil })
			return srv, a, &waits
		}
		t.Run(p.kind+"/waited", func(t *testing.T) {
			srv, a, waits := start(t, "3")
			rep, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.NoError(t, err, rep.Log)
			assert.Equal(t, []time.Duration{3 * time.Second}, *waits, "the provider's wait, before the retry")
			assert.Equal(t, 2, srv.Calls())
			assert.Contains(t, rep.Log, "retry 1 of 2 in 3s")
		})
		t.Run(p.kind+"/beyond the bound", func(t *testing.T) {
			srv, a, waits := start(t, "120")
			rep, err := a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
			var pe *apimode.ProviderError
			require.ErrorAs(t, err, &pe)
			assert.Contains(t, err.Error(), "is rate limiting the key (retry after 2m0s)")
			assert.Empty(t, *waits)
			assert.Equal(t, 1, srv.Calls(), "no retry sooner than the provider asked")
			assert.Contains(t, rep.Log, "the provider asks to wait 2m0s, more than the 1m0s honoured")
		})
		t.Run(p.kind+"/past the deadline", func(t *testing.T) {
			srv, a, waits := start(t, "30")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rep, err := a.RunAPI(ctx, runner.APIRun{Input: functional(), Worktree: worktree(t)})
			require.Error(t, err)
			assert.Empty(t, *waits)
			assert.Equal(t, 1, srv.Calls())
			assert.Contains(t, rep.Log, "past the run's time limit")
		})
	}
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"7": 7 * time.Second, "0": 0,
		"Sat, 05 Dec 2026 10:01:30 GMT": 90 * time.Second, "Sat, 05 Dec 2026 09:00:00 GMT": 0} {
		d, ok := apimode.RetryAfter(v, now)
		assert.True(t, ok, v)
		assert.Equal(t, want, d, v)
	}
	for _, v := range []string{"", "soon", "-3", "-99999999999999999999"} {
		_, ok := apimode.RetryAfter(v, now)
		assert.False(t, ok, v)
	}
	// More seconds than an int64 holds is a wait longer than any bound, not none.
	d, ok := apimode.RetryAfter("99999999999999999999", now)
	assert.True(t, ok)
	assert.Greater(t, d, time.Hour)
}

// A run leaves what it likes in the worktree, a FIFO among it (git's reset and clean leave one
// in a tracked directory): read_file refuses it at once instead of waiting for ever in open(2)
// for a writer, which no deadline of the run could end.
func TestReadFileRefusesAFIFO(t *testing.T) {
	t.Parallel()
	wt := worktree(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(wt, "notes.md"), 0o644))
	tools, err := apimode.OpenTools(wt, functional())
	require.NoError(t, err)
	defer tools.Close()
	type answer struct {
		out string
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := tools.Call(context.Background(), "read_file", []byte(`{"path": "notes.md"}`))
		done <- answer{out, err}
	}()
	select {
	case a := <-done:
		require.ErrorIs(t, a.err, apimode.ErrRefused)
		require.Contains(t, a.err.Error(), "neither a regular file nor a directory")
		require.NotContains(t, a.err.Error(), wt, "no host path reaches the model")
	case <-time.After(30 * time.Second):
		t.Fatal("read_file of a FIFO blocked")
	}
}

// An openai-api agent's requests carry its key and nothing of Alfred's own environment: the
// OpenAI SDK's client reads OPENAI_ORG_ID, OPENAI_PROJECT_ID and OPENAI_CUSTOM_HEADERS (a
// gateway's token, say), which must not reach the agent's base_url, whoever runs it.
func TestOpenAIRequestsCarryNothingOfAlfredsEnvironment(t *testing.T) {
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Gateway-Token: gw-secret-123")
	t.Setenv("OPENAI_ORG_ID", "org-alfred-host")
	t.Setenv("OPENAI_PROJECT_ID", "proj-host")
	t.Setenv("OPENAI_API_KEY", "sk-alfreds-own")
	var got []http.Header
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/models") {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model","created":1,"owned_by":"x"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"{\"summary\":\"s\",\"understanding\":\"u\"}"}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
	}))
	t.Cleanup(srv.Close)
	a, err := apimode.New(apimode.Config{Kind: apimode.OpenAI, Model: "m", APIKey: "sk-agent", BaseURL: srv.URL + "/v1/"})
	require.NoError(t, err)
	_, err = a.RunAPI(context.Background(), runner.APIRun{Input: functional(), Worktree: worktree(t)})
	require.NoError(t, err)
	require.NoError(t, a.Check(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2, "the run's one turn and the check's model list")
	for _, h := range got {
		require.Equal(t, "Bearer sk-agent", h.Get("Authorization"))
		require.Empty(t, h.Get("X-Gateway-Token"))
		require.Empty(t, h.Get("OpenAI-Organization"))
		require.Empty(t, h.Get("OpenAI-Project"))
	}
}

// A search follows the run's time limit: once the run's context ends, it stops instead of
// reading up to its file bounds (one reply may make 16 searches of 20,000 files each).
func TestSearchStopsWhenTheRunsTimeIsUp(t *testing.T) {
	t.Parallel()
	wt := worktree(t)
	tools, err := apimode.OpenTools(wt, functional())
	require.NoError(t, err)
	defer tools.Close()
	out, err := tools.Call(context.Background(), "search_text", []byte(`{"query": "package"}`))
	require.NoError(t, err, out)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tools.Call(ctx, "search_text", []byte(`{"query": "package"}`))
	require.ErrorIs(t, err, context.Canceled)
}
