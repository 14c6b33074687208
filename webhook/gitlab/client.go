package gitlab

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

const (
	// LabelColor is the color given to project labels that SetLabels and EnsureLabels create.
	LabelColor = "#6699cc"
	// LogTailBytes is how much of the end of a failed job's trace CIStatus keeps (4 KiB).
	LogTailBytes = 4 << 10
)

// ClientConfig configures NewClient. BaseURL is the GitLab instance, e.g.
// "https://gitlab.example.com" ("/api/v4/" is appended unless present); Token is a personal,
// project or group access token, sent in the PRIVATE-TOKEN header. The fields, the retry
// settings among them, are documented on the aliased type.
type ClientConfig = forgehttp.ClientConfig

// Client is the outbound forge.Forge for one GitLab instance, on the REST v4 API through
// gitlab.com/gitlab-org/api/client-go. A repository is the project's full path
// ("group/sub/name"), sent URL-escaped as the project ID. Errors wrap forge.ErrNotFound
// (404), forge.ErrForbidden (401/403) or forge.ErrConflict (409/422), keep GitLab's message
// and never contain the token. It is safe for concurrent use.
type Client struct {
	api   *gl.Client
	token string
	bot   forgehttp.BotCache
}

var _ forge.Forge = (*Client)(nil)

// NewClient builds a Client. It makes no request. It fails when BaseURL or Token is empty or
// BaseURL does not parse.
func NewClient(cfg ClientConfig) (*Client, error) {
	if strings.TrimSpace(cfg.BaseURL) == "" {
		return nil, errors.New("gitlab: new client: base URL is empty")
	}
	if cfg.Token == "" {
		return nil, errors.New("gitlab: new client: token is empty")
	}
	retries, waitMin, waitMax := forgehttp.Retries(cfg)
	opts := []gl.ClientOptionFunc{
		gl.WithBaseURL(cfg.BaseURL),
		gl.WithCustomRetryMax(retries),
		gl.WithCustomRetryWaitMinMax(waitMin, waitMax),
		gl.WithCustomBackoff(forgehttp.Backoff),
		gl.WithCustomRetry(forgehttp.CheckRetry),
		gl.WithUserAgent("alfred"),
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	hc.Transport = forgehttp.CapAnswers(hc.Transport, forgehttp.MaxAnswerBytes)
	opts = append(opts, gl.WithHTTPClient(hc))
	api, err := gl.NewClient(cfg.Token, opts...)
	if err != nil {
		return nil, fmt.Errorf("gitlab: new client: %s", censor.New(censor.Config{Secrets: []string{cfg.Token}}).String(err.Error()))
	}
	return &Client{api: api, token: cfg.Token}, nil
}

// Kind returns forge.KindGitLab.
func (c *Client) Kind() forge.Kind { return forge.KindGitLab }

// clientStatus returns the HTTP status of a failed call, 0 when there was no response.
func clientStatus(resp *gl.Response, err error) int {
	var er *gl.ErrorResponse
	if errors.As(err, &er) && er.StatusCode != 0 {
		return er.StatusCode
	}
	if resp != nil && resp.Response != nil {
		return resp.StatusCode
	}
	return 0
}

// wrap turns a client-go error into a *forgehttp.Error naming the operation, matching a forge
// sentinel by status, and with the token removed from the message.
func (c *Client) wrap(op string, resp *gl.Response, err error) error {
	return forgehttp.NewError("gitlab", op, clientStatus(resp, err), err, c.token)
}
