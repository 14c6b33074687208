package forgejo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"code.gitea.io/sdk/gitea"
	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

const (
	// LabelColor is the color (hex RGB, as Forgejo stores it) of labels that SetLabels and
	// EnsureLabels create.
	LabelColor = "#6699cc"
	// clientPageSize is the limit asked for on list endpoints; Forgejo caps it at
	// [api] MAX_RESPONSE_ITEMS (default 50).
	clientPageSize = 50
)

// ClientConfig configures NewClient. BaseURL is the Forgejo (or Gitea) instance, e.g.
// "https://codeberg.org", with or without "/api/v1"; Token is sent as "Authorization: token …".
// The fields, the retry settings among them, are documented on the aliased type.
type ClientConfig = forgehttp.ClientConfig

// Client is the outbound forge.Forge for one Forgejo or Gitea instance, on the /api/v1 API
// through code.gitea.io/sdk/gitea. A repository is "owner/name". Pull requests are issues on
// Forgejo (one number space), so IssueRef.MergeRequest makes no difference to the issue and
// comment methods. Errors wrap forge.ErrNotFound (404), forge.ErrForbidden (401/403) or
// forge.ErrConflict (409/422), keep Forgejo's message and never contain the token. It is safe
// for concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client // retrying transport
	bot     forgehttp.BotCache
}

var _ forge.Forge = (*Client)(nil)

// NewClient builds a Client. It makes no request: the SDK's server-version probe
// (GET /api/v1/version) is switched off with gitea.SetGiteaVersion(""), so the SDK assumes a
// current server. It fails when BaseURL or Token is empty.
func NewClient(cfg ClientConfig) (*Client, error) {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		return nil, errors.New("forgejo: new client: base URL is empty")
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, errors.New("forgejo: new client: base URL must start with http:// or https://")
	}
	base = strings.TrimSuffix(base, "/api/v1")
	if cfg.Token == "" {
		return nil, errors.New("forgejo: new client: token is empty")
	}
	retries, waitMin, waitMax := forgehttp.Retries(cfg)
	inner := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		inner = &c
	}
	inner.Transport = forgehttp.CapAnswers(inner.Transport, forgehttp.MaxAnswerBytes)
	rc := &retryablehttp.Client{
		HTTPClient:   inner,
		RetryWaitMin: waitMin,
		RetryWaitMax: waitMax,
		RetryMax:     retries,
		CheckRetry:   forgehttp.CheckRetry,
		Backoff:      forgehttp.Backoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler, // hand the last 429/5xx to the SDK
	}
	c := &Client{
		baseURL: base,
		token:   cfg.Token,
		http:    &http.Client{Transport: &retryablehttp.RoundTripper{Client: rc}, Jar: inner.Jar, CheckRedirect: inner.CheckRedirect},
	}
	if _, err := c.newAPI(context.Background()); err != nil {
		return nil, fmt.Errorf("forgejo: new client: %s", censor.New(censor.Config{Secrets: []string{cfg.Token}}).String(err.Error()))
	}
	return c, nil
}

// api returns an SDK client bound to ctx. The SDK keeps one context per client, so each call
// gets its own (cheap: no request is made).
func (c *Client) api(ctx context.Context) *gitea.Client {
	g, err := c.newAPI(ctx)
	if err != nil { // unreachable: NewClient built one with the same options
		panic("forgejo: build SDK client: " + err.Error())
	}
	return g
}

func (c *Client) newAPI(ctx context.Context) (*gitea.Client, error) {
	return gitea.NewClient(c.baseURL,
		gitea.SetToken(c.token), gitea.SetHTTPClient(c.http), gitea.SetGiteaVersion(""),
		gitea.SetContext(ctx), gitea.SetUserAgent("alfred"))
}

// clientSplit splits "owner/name".
func clientSplit(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("forgejo: repository %q is not owner/name: %w", repo, forge.ErrNotFound)
	}
	return owner, name, nil
}

// Kind returns forge.KindForgejo.
func (c *Client) Kind() forge.Kind { return forge.KindForgejo }

// clientStatus returns the HTTP status of a call, 0 when there was no response.
func clientStatus(resp *gitea.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}

// wrap turns an SDK error into a *forgehttp.Error naming the operation, matching a forge
// sentinel by status, and with the token removed from the message.
func (c *Client) wrap(op string, resp *gitea.Response, err error) error {
	return forgehttp.NewError("forgejo", op, clientStatus(resp), err, c.token)
}

// maxListPages bounds the pages one list read asks for (maxListPages × clientPageSize items).
const maxListPages = 200

// morePages reports whether a list has a page after page, which held n items, seen items read
// on every page so far: what the Link header says when the server sends one (rel="next");
// else, since Gitea and Forgejo send only X-Total-Count on several lists (a pull request's
// reviews, the notifications, the labels, the hooks), whether fewer items than that total
// have been read. An empty page, or maxListPages pages, end the list.
func morePages(h http.Header, page, n, seen int) bool {
	if n == 0 || page >= maxListPages {
		return false
	}
	if link := h.Get("Link"); link != "" {
		return strings.Contains(link, `rel="next"`)
	}
	total, err := strconv.Atoi(h.Get("X-Total-Count"))
	return err == nil && seen < total
}

// respHeader is the header of an SDK call's answer, nil without one.
func respHeader(resp *gitea.Response) http.Header {
	if resp == nil || resp.Response == nil {
		return nil
	}
	return resp.Header
}
