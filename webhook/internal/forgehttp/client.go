package forgehttp

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Retry defaults of both clients' ClientConfig.
const (
	// DefaultMaxRetries is how often a request is retried after HTTP 429 or 5xx.
	DefaultMaxRetries = 4
	// DefaultRetryWaitMin is the first backoff step after a 5xx.
	DefaultRetryWaitMin = 250 * time.Millisecond
	// DefaultRetryWaitMax caps every single wait, including a longer Retry-After.
	DefaultRetryWaitMax = 30 * time.Second
)

// ClientConfig configures the API client of either forge; gitlab.ClientConfig and
// forgejo.ClientConfig are this type, and their NewClient says what BaseURL and Token are there.
type ClientConfig struct {
	// BaseURL is the forge instance, e.g. "https://gitlab.example.com" or "https://codeberg.org".
	BaseURL string `json:"base_url"`
	// Token is an access token of the bot account. It never appears in an error message.
	Token string `json:"-"`
	// HTTPClient carries each attempt; nil means a default client. Its Timeout bounds one
	// attempt; the ctx of a call bounds the call with its retries.
	HTTPClient *http.Client `json:"-"`
	// MaxRetries bounds the retries of one request after HTTP 429, a 5xx other than 501 or a
	// failed dial (see CheckRetry): 0 means DefaultMaxRetries (4), a negative value none.
	MaxRetries int `json:"max_retries,omitempty"`
	// RetryWaitMin and RetryWaitMax bound the backoff (see Backoff): after a 5xx the wait
	// doubles from RetryWaitMin (with jitter); after a 429 or 503 the client waits what
	// Retry-After (seconds or HTTP date, RFC 9110 §10.2.3) or else GitLab's RateLimit-Reset
	// (Unix seconds) asks for. No wait exceeds RetryWaitMax. Zero values mean
	// DefaultRetryWaitMin (250 ms) and DefaultRetryWaitMax (30 s).
	RetryWaitMin time.Duration `json:"retry_wait_min,omitempty"`
	RetryWaitMax time.Duration `json:"retry_wait_max,omitempty"`
}

// Retries returns cfg's retry settings with the defaults applied: MaxRetries 0 becomes
// DefaultMaxRetries and a negative value 0 (no retries); a wait that is not positive becomes
// DefaultRetryWaitMin or DefaultRetryWaitMax; and the longest wait is raised to the first one
// when it is lower.
func Retries(cfg ClientConfig) (maxRetries int, waitMin, waitMax time.Duration) {
	maxRetries, waitMin, waitMax = cfg.MaxRetries, cfg.RetryWaitMin, cfg.RetryWaitMax
	switch {
	case maxRetries == 0:
		maxRetries = DefaultMaxRetries
	case maxRetries < 0:
		maxRetries = 0
	}
	if waitMin <= 0 {
		waitMin = DefaultRetryWaitMin
	}
	if waitMax <= 0 {
		waitMax = DefaultRetryWaitMax
	}
	return maxRetries, waitMin, max(waitMax, waitMin)
}

// BotCache keeps the first successful answer about the token's own account, which does not
// change while a client lives. The zero value is empty and ready; it is safe for concurrent use.
type BotCache struct {
	mu  sync.Mutex
	bot *forge.User
}

// Get returns the cached account, or calls fetch and caches its answer when it succeeds. Two
// concurrent first calls may both fetch.
func (c *BotCache) Get(ctx context.Context, fetch func(context.Context) (forge.User, error)) (forge.User, error) {
	c.mu.Lock()
	if c.bot != nil {
		u := *c.bot
		c.mu.Unlock()
		return u, nil
	}
	c.mu.Unlock()
	u, err := fetch(ctx)
	if err != nil {
		return forge.User{}, err
	}
	c.mu.Lock()
	c.bot = &u
	c.mu.Unlock()
	return u, nil
}

// Uniq returns names without empty and repeated ones, in their first order.
func Uniq(names []string) []string {
	out := make([]string, 0, len(names))
	for _, v := range names {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// LabelChange cleans the arguments of forge.Forge.SetLabels: both lists lose empty and repeated
// names, and a name in both is only added.
func LabelChange(add, remove []string) (cleanAdd, cleanRemove []string) {
	add = Uniq(add)
	return add, slices.DeleteFunc(Uniq(remove), func(s string) bool { return slices.Contains(add, s) })
}

// SortComments orders comments oldest first, by CreatedAt and then by ID, as forge.Forge.Comments
// returns them.
func SortComments(cs []forge.Comment) {
	slices.SortStableFunc(cs, func(a, b forge.Comment) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
}

// TargetBranch returns target, or when it is empty the default branch of repo as f reads it:
// the target of a forge.NewMergeRequest.
func TargetBranch(ctx context.Context, f interface {
	Repository(ctx context.Context, repo string) (*forge.Repository, error)
}, repo, target string) (string, error) {
	if target != "" {
		return target, nil
	}
	r, err := f.Repository(ctx, repo)
	if err != nil {
		return "", err
	}
	return r.DefaultBranch, nil
}
