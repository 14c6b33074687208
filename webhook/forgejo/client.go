package forgejo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/alfred-bot/alfred/internal/censor"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// Defaults for ClientConfig.
const (
	// DefaultMaxRetries is how often a request is retried after HTTP 429 or 5xx when
	// ClientConfig.MaxRetries is 0.
	DefaultMaxRetries = 4
	// DefaultRetryWaitMin is the first backoff step after a 5xx.
	DefaultRetryWaitMin = 250 * time.Millisecond
	// DefaultRetryWaitMax caps every single wait, including a longer Retry-After.
	DefaultRetryWaitMax = 30 * time.Second
	// LabelColor is the color (hex RGB, as Forgejo stores it) of labels that SetLabels and
	// EnsureLabels create.
	LabelColor = "#6699cc"
	// clientPageSize is the limit asked for on list endpoints; Forgejo caps it at
	// [api] MAX_RESPONSE_ITEMS (default 50).
	clientPageSize = 50
)

// ClientConfig configures NewClient.
type ClientConfig struct {
	// BaseURL is the Forgejo (or Gitea) instance, e.g. "https://codeberg.org", without "/api/v1".
	BaseURL string `json:"base_url"`
	// Token is an access token of the bot account, sent as "Authorization: token …". It never
	// appears in an error message.
	Token string `json:"-"`
	// HTTPClient carries each attempt; nil means http.DefaultClient's settings. Its Timeout, if
	// any, bounds each attempt, not the retries together (use the ctx for that).
	HTTPClient *http.Client `json:"-"`
	// MaxRetries bounds the retries of one request after HTTP 429 or 5xx (except 501) or a
	// failed dial: 0 means DefaultMaxRetries, a negative value disables retries.
	MaxRetries int `json:"max_retries,omitempty"`
	// RetryWaitMin and RetryWaitMax bound the backoff: after a 5xx the wait doubles from
	// RetryWaitMin (with jitter); after a 429 or 503 the client waits what the Retry-After
	// header (seconds or HTTP date, RFC 9110 §10.2.3) asks for. No wait exceeds RetryWaitMax.
	// Zero values mean DefaultRetryWaitMin and DefaultRetryWaitMax.
	RetryWaitMin time.Duration `json:"retry_wait_min,omitempty"`
	RetryWaitMax time.Duration `json:"retry_wait_max,omitempty"`
}

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

	mu  sync.Mutex
	bot *forge.User // cached answer of GET /user
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
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	waitMin := clientDuration(cfg.RetryWaitMin, DefaultRetryWaitMin)
	waitMax := max(clientDuration(cfg.RetryWaitMax, DefaultRetryWaitMax), waitMin)
	inner := cfg.HTTPClient
	if inner == nil {
		inner = &http.Client{}
	}
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

func clientDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
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

// BotUser returns the token's account (GET /api/v1/user). The first success is cached.
func (c *Client) BotUser(ctx context.Context) (forge.User, error) {
	c.mu.Lock()
	if c.bot != nil {
		u := *c.bot
		c.mu.Unlock()
		return u, nil
	}
	c.mu.Unlock()
	u, resp, err := c.api(ctx).GetMyUserInfo()
	if err != nil {
		return forge.User{}, c.wrap("get current user", resp, err)
	}
	bot := forge.User{ID: u.ID, Login: u.UserName}
	c.mu.Lock()
	c.bot = &bot
	c.mu.Unlock()
	return bot, nil
}

// CanWrite reports whether login owns the repository or has write, admin or owner permission
// on it (GET /repos/{owner}/{repo}/collaborators/{login}/permission, which also counts team
// and admin rights). Forgejo lets only repository admins ask about other users, so the bot
// needs admin on the repository, else the error wraps forge.ErrForbidden. An unknown login is
// false with a nil error.
func (c *Client) CanWrite(ctx context.Context, repo, login string) (bool, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return false, err
	}
	if strings.EqualFold(owner, login) {
		return true, nil
	}
	p, resp, err := c.api(ctx).CollaboratorPermission(owner, name, login)
	if err != nil {
		if clientStatus(resp) == http.StatusNotFound {
			// 404 is an unknown user or a missing repository; tell them apart.
			if _, err := c.Repository(ctx, repo); err != nil {
				return false, err
			}
			return false, nil
		}
		return false, c.wrap("get permission of "+login+" on "+repo, resp, err)
	}
	if p == nil {
		return false, nil
	}
	switch p.Permission {
	case gitea.AccessModeWrite, gitea.AccessModeAdmin, gitea.AccessModeOwner:
		return true, nil
	}
	return false, nil
}

// Repository returns the repository's full name, default branch and clone_url.
func (c *Client) Repository(ctx context.Context, repo string) (*forge.Repository, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	r, resp, err := c.api(ctx).GetRepo(owner, name)
	if err != nil {
		return nil, c.wrap("get repository "+repo, resp, err)
	}
	return &forge.Repository{Path: r.FullName, DefaultBranch: r.DefaultBranch, CloneURL: r.CloneURL}, nil
}

// Issue reads an issue or pull request by index (GET /repos/{o}/{r}/issues/{index}).
func (c *Client) Issue(ctx context.Context, ref forge.IssueRef) (*forge.Issue, error) {
	gi, err := c.issue(ctx, ref)
	if err != nil {
		return nil, err
	}
	is := &forge.Issue{
		Ref: ref, Title: gi.Title, Body: gi.Body, State: string(gi.State), WebURL: gi.HTMLURL,
		Labels: []string{}, Assignees: []string{},
	}
	if gi.Poster != nil {
		is.Author = forge.User{ID: gi.Poster.ID, Login: gi.Poster.UserName}
	}
	for _, l := range gi.Labels {
		is.Labels = append(is.Labels, l.Name)
	}
	for _, a := range gi.Assignees {
		is.Assignees = append(is.Assignees, a.UserName)
	}
	return is, nil
}

func (c *Client) issue(ctx context.Context, ref forge.IssueRef) (*gitea.Issue, error) {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return nil, err
	}
	gi, resp, err := c.api(ctx).GetIssue(owner, name, ref.Number)
	if err != nil {
		return nil, c.wrap("get issue "+ref.String(), resp, err)
	}
	return gi, nil
}

// SetIssueBody replaces the issue (or pull request) description (PATCH …/issues/{index}).
func (c *Client) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	_, resp, err := c.api(ctx).EditIssue(owner, name, ref.Number, gitea.EditIssueOption{Body: &body})
	if err != nil {
		return c.wrap("set description of "+ref.String(), resp, err)
	}
	return nil
}

// Comments lists the comments of the issue or pull request oldest first
// (GET …/issues/{index}/comments, only plain comments), following Link rel="next" while the
// server paginates (Forgejo itself returns them all at once).
func (c *Client) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return nil, err
	}
	api := c.api(ctx)
	var out []forge.Comment
	for page := 1; ; {
		list, resp, err := api.ListIssueComments(owner, name, ref.Number, gitea.ListIssueCommentOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize},
		})
		if err != nil {
			return nil, c.wrap("list comments of "+ref.String(), resp, err)
		}
		for _, cm := range list {
			fc := forge.Comment{ID: cm.ID, Body: cm.Body, CreatedAt: cm.Created, UpdatedAt: cm.Updated}
			if cm.Poster != nil {
				fc.Author = forge.User{ID: cm.Poster.ID, Login: cm.Poster.UserName}
			}
			out = append(out, fc)
		}
		if resp == nil || resp.NextPage <= page || len(list) == 0 {
			break
		}
		page = resp.NextPage
	}
	slices.SortStableFunc(out, func(a, b forge.Comment) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return out, nil
}

// Comment posts a comment on the issue or pull request and returns its id.
func (c *Client) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return 0, err
	}
	cm, resp, err := c.api(ctx).CreateIssueComment(owner, name, ref.Number, gitea.CreateIssueCommentOption{Body: body})
	if err != nil {
		return 0, c.wrap("comment on "+ref.String(), resp, err)
	}
	return cm.ID, nil
}

// EditComment replaces a comment's body (PATCH …/issues/comments/{id}; the id is repository
// wide, ref.Number is not sent).
func (c *Client) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	_, resp, err := c.api(ctx).EditIssueComment(owner, name, id, gitea.EditIssueCommentOption{Body: body})
	if err != nil {
		return c.wrap(fmt.Sprintf("edit comment %d of %s", id, ref), resp, err)
	}
	return nil
}

// SetLabels reads the issue's labels, removes each present label of remove
// (DELETE …/issues/{index}/labels/{id}) and adds the absent ones of add
// (POST …/issues/{index}/labels with ids). Names resolve as in EnsureLabels, which creates the
// missing ones first. A name in both add and remove is added.
func (c *Client) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	add = clientUniq(add)
	remove = slices.DeleteFunc(clientUniq(remove), func(s string) bool { return slices.Contains(add, s) })
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	gi, err := c.issue(ctx, ref)
	if err != nil {
		return err
	}
	present := map[string]int64{}
	for _, l := range gi.Labels {
		present[l.Name] = l.ID
	}
	api := c.api(ctx)
	for _, n := range remove {
		id, ok := present[n]
		if !ok {
			continue
		}
		resp, err := api.DeleteIssueLabel(owner, name, ref.Number, id)
		if err != nil && clientStatus(resp) != http.StatusNotFound { // 404: removed meanwhile
			return c.wrap(fmt.Sprintf("remove label %q from %s", n, ref), resp, err)
		}
	}
	var missing []string
	for _, n := range add {
		if _, ok := present[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ids, err := c.ensureLabelIDs(ctx, owner, name, missing)
	if err != nil {
		return err
	}
	if _, resp, err := api.AddIssueLabels(owner, name, ref.Number, gitea.IssueLabelsOption{Labels: ids}); err != nil {
		return c.wrap("add labels to "+ref.String(), resp, err)
	}
	return nil
}

// EnsureLabels creates, with LabelColor, the names that exist neither as labels of the
// repository (GET /repos/{o}/{r}/labels, every page) nor, for an organisation's repository, as
// labels of the organisation (GET /orgs/{org}/labels, every page): one
// POST /repos/{o}/{r}/labels each. Existing labels are not modified; empty and repeated names
// are skipped, and no names makes no request. Forgejo does not refuse a duplicate name, so two
// concurrent calls may both create a label.
func (c *Client) EnsureLabels(ctx context.Context, repo string, names []string) error {
	names = clientUniq(names)
	if len(names) == 0 {
		return nil
	}
	owner, name, err := clientSplit(repo)
	if err != nil {
		return err
	}
	_, err = c.ensureLabelIDs(ctx, owner, name, names)
	return err
}

// ensureLabelIDs resolves names to label ids, repository labels first, then organisation
// labels, creating the ones found in neither as repository labels with LabelColor.
func (c *Client) ensureLabelIDs(ctx context.Context, owner, name string, names []string) ([]int64, error) {
	api := c.api(ctx)
	known := map[string]int64{}
	for page := 1; ; {
		list, resp, err := api.ListRepoLabels(owner, name, gitea.ListLabelsOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}})
		if err != nil {
			return nil, c.wrap("list labels of "+owner+"/"+name, resp, err)
		}
		for _, l := range list {
			known[l.Name] = l.ID
		}
		if resp == nil || resp.NextPage <= page || len(list) == 0 {
			break
		}
		page = resp.NextPage
	}
	if slices.ContainsFunc(names, func(n string) bool { _, ok := known[n]; return !ok }) {
		// Organisation labels; a user-owned repository answers 404.
		for page := 1; ; {
			list, resp, err := api.ListOrgLabels(owner, gitea.ListOrgLabelsOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}})
			if err != nil {
				if clientStatus(resp) == http.StatusNotFound {
					break
				}
				return nil, c.wrap("list labels of organisation "+owner, resp, err)
			}
			for _, l := range list {
				if _, ok := known[l.Name]; !ok {
					known[l.Name] = l.ID
				}
			}
			if resp == nil || resp.NextPage <= page || len(list) == 0 {
				break
			}
			page = resp.NextPage
		}
	}
	ids := make([]int64, 0, len(names))
	for _, n := range names {
		if id, ok := known[n]; ok {
			ids = append(ids, id)
			continue
		}
		l, resp, err := api.CreateLabel(owner, name, gitea.CreateLabelOption{Name: n, Color: LabelColor})
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("create label %q in %s/%s", n, owner, name), resp, err)
		}
		ids = append(ids, l.ID)
	}
	return ids, nil
}

func clientUniq(s []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// SetAssignees reads the current assignees and, when the set changes, sends the full new list
// (PATCH …/issues/{index} with "assignees"). An added login that does not exist
// (GET /users/{login} is 404) is an error wrapping forge.ErrNotFound. A concurrent edit between
// the read and the write is overwritten.
func (c *Client) SetAssignees(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	owner, name, err := clientSplit(ref.Repo)
	if err != nil {
		return err
	}
	gi, err := c.issue(ctx, ref)
	if err != nil {
		return err
	}
	var cur []string
	for _, a := range gi.Assignees {
		cur = append(cur, a.UserName)
	}
	has := func(set []string, login string) bool {
		return slices.ContainsFunc(set, func(s string) bool { return strings.EqualFold(s, login) })
	}
	next := slices.DeleteFunc(slices.Clone(cur), func(s string) bool { return has(remove, s) })
	api := c.api(ctx)
	for _, login := range clientUniq(add) {
		if has(next, login) {
			continue
		}
		if _, resp, err := api.GetUserInfo(login); err != nil {
			return c.wrap(fmt.Sprintf("set assignees of %s: find user %q", ref, login), resp, err)
		}
		next = append(next, login)
	}
	if len(next) == len(cur) && !slices.ContainsFunc(next, func(s string) bool { return !has(cur, s) }) {
		return nil
	}
	if next == nil {
		next = []string{} // [] clears; null would leave the assignees alone
	}
	if _, resp, err := api.EditIssue(owner, name, ref.Number, gitea.EditIssueOption{Assignees: next}); err != nil {
		return c.wrap("set assignees of "+ref.String(), resp, err)
	}
	return nil
}

// CreateMergeRequest returns the open pull request whose head is mr.SourceBranch if there is
// one, else opens a new one (an empty TargetBranch means the default branch). When Forgejo
// refuses because one exists (409, or 422 on older servers) it returns that one.
func (c *Client) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	if existing, err := c.openPull(ctx, owner, name, mr.SourceBranch); err != nil || existing != nil {
		return existing, err
	}
	target := mr.TargetBranch
	if target == "" {
		r, err := c.Repository(ctx, repo)
		if err != nil {
			return nil, err
		}
		target = r.DefaultBranch
	}
	pr, resp, err := c.api(ctx).CreatePullRequest(owner, name, gitea.CreatePullRequestOption{
		Head: mr.SourceBranch, Base: target, Title: mr.Title, Body: mr.Body,
	})
	if err != nil {
		if s := clientStatus(resp); s == http.StatusConflict || s == http.StatusUnprocessableEntity {
			if existing, err2 := c.openPull(ctx, owner, name, mr.SourceBranch); err2 == nil && existing != nil {
				return existing, nil
			}
		}
		return nil, c.wrap("create pull request for "+mr.SourceBranch+" in "+repo, resp, err)
	}
	return clientPull(pr), nil
}

// openPull finds the open pull request with head branch in the same repository, or nil.
func (c *Client) openPull(ctx context.Context, owner, name, branch string) (*forge.MergeRequest, error) {
	api := c.api(ctx)
	for page := 1; ; {
		list, resp, err := api.ListRepoPullRequests(owner, name, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: clientPageSize}, State: gitea.StateOpen,
		})
		if err != nil {
			return nil, c.wrap("list pull requests of "+owner+"/"+name, resp, err)
		}
		for _, pr := range list {
			if pr.Head != nil && pr.Head.Ref == branch && pr.State == gitea.StateOpen && !pr.HasMerged {
				return clientPull(pr), nil
			}
		}
		if resp == nil || resp.NextPage <= page || len(list) == 0 {
			return nil, nil
		}
		page = resp.NextPage
	}
}

// MergeRequest reads a pull request by index. State is "open", "closed" or "merged".
func (c *Client) MergeRequest(ctx context.Context, repo string, number int64) (*forge.MergeRequest, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	pr, resp, err := c.api(ctx).GetPullRequest(owner, name, number)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get pull request %s!%d", repo, number), resp, err)
	}
	return clientPull(pr), nil
}

func clientPull(pr *gitea.PullRequest) *forge.MergeRequest {
	out := &forge.MergeRequest{Number: pr.Index, Title: pr.Title, Body: pr.Body, State: string(pr.State), WebURL: pr.HTMLURL}
	if pr.HasMerged {
		out.State, out.Merged = "merged", true
	}
	if pr.Head != nil {
		out.SourceBranch, out.HeadSHA = pr.Head.Ref, pr.Head.Sha
	}
	if pr.Base != nil {
		out.TargetBranch = pr.Base.Ref
	}
	if pr.Poster != nil {
		out.Author = forge.User{ID: pr.Poster.ID, Login: pr.Poster.UserName}
	}
	return out
}

// CIStatus returns the combined commit status of sha (GET …/commits/{sha}/status): "success"
// and "warning" are CISuccess, "pending" CIPending, "failure" and "error" CIFailed; no status
// at all is CINone. For CIFailed, each failing status becomes a FailedJob with its context as
// Name, target_url as WebURL and description as Log.
func (c *Client) CIStatus(ctx context.Context, repo, sha string) (*forge.Pipeline, error) {
	owner, name, err := clientSplit(repo)
	if err != nil {
		return nil, err
	}
	cs, resp, err := c.api(ctx).GetCombinedStatus(owner, name, sha)
	if err != nil {
		return nil, c.wrap("get combined status of "+repo+"@"+sha, resp, err)
	}
	out := &forge.Pipeline{SHA: sha, State: forge.CINone}
	if cs == nil || len(cs.Statuses) == 0 {
		return out, nil
	}
	switch cs.State {
	case gitea.StatusSuccess, gitea.StatusWarning:
		out.State = forge.CISuccess
	case gitea.StatusFailure, gitea.StatusError:
		out.State = forge.CIFailed
	default:
		out.State = forge.CIPending
	}
	for _, s := range cs.Statuses {
		if s == nil {
			continue
		}
		if out.WebURL == "" {
			out.WebURL = s.TargetURL
		}
		if out.State == forge.CIFailed && (s.State == gitea.StatusFailure || s.State == gitea.StatusError) {
			out.FailedJobs = append(out.FailedJobs, forge.FailedJob{Name: s.Context, WebURL: s.TargetURL, Log: s.Description})
		}
	}
	return out, nil
}

// clientStatus returns the HTTP status of a call, 0 when there was no response.
func clientStatus(resp *gitea.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}

// wrap turns an SDK error into a *clientError naming the operation, matching a forge sentinel
// by status, and with the token removed from the message.
func (c *Client) wrap(op string, resp *gitea.Response, err error) error {
	status := clientStatus(resp)
	e := &clientError{op: op, status: status, cause: err, msg: censor.New(censor.Config{Secrets: []string{c.token}}).String(err.Error())}
	switch status {
	case http.StatusNotFound:
		e.sentinel = forge.ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		e.sentinel = forge.ErrForbidden
	case http.StatusConflict, http.StatusUnprocessableEntity:
		e.sentinel = forge.ErrConflict
	}
	return e
}

// clientError is an API failure. errors.Is matches its forge sentinel and its cause (for
// example context.Canceled); Error never contains the token.
type clientError struct {
	op       string
	status   int
	sentinel error
	cause    error
	msg      string
}

func (e *clientError) Error() string {
	s := "forgejo: " + e.op + ": "
	if e.sentinel != nil {
		s += e.sentinel.Error() + ": "
	}
	if e.status != 0 && !strings.Contains(e.msg, strconv.Itoa(e.status)) {
		s += "HTTP " + strconv.Itoa(e.status) + ": "
	}
	return s + e.msg
}

func (e *clientError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.cause}
	}
	return []error{e.sentinel, e.cause}
}
