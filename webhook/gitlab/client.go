package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

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
	// LabelColor is the color given to project labels that SetLabels and EnsureLabels create.
	LabelColor = "#6699cc"
	// LogTailBytes is how much of the end of a failed job's trace CIStatus keeps (4 KiB).
	LogTailBytes = 4 << 10
)

// ClientConfig configures NewClient.
type ClientConfig struct {
	// BaseURL is the GitLab instance, e.g. "https://gitlab.example.com"; "/api/v4/" is appended
	// unless present.
	BaseURL string `json:"base_url"`
	// Token is a personal, project or group access token of the bot account, sent in the
	// PRIVATE-TOKEN header. It never appears in an error message.
	Token string `json:"-"`
	// HTTPClient carries the requests; nil means a pooled default client. Its Timeout, if any,
	// bounds each attempt, not the retries together (use the ctx for that).
	HTTPClient *http.Client `json:"-"`
	// MaxRetries bounds the retries of one request after HTTP 429 or 5xx (except 501): 0 means
	// DefaultMaxRetries, a negative value disables retries.
	MaxRetries int `json:"max_retries,omitempty"`
	// RetryWaitMin and RetryWaitMax bound the backoff: after a 5xx the wait doubles from
	// RetryWaitMin (with jitter); after a 429 the client waits what the Retry-After header
	// (seconds or HTTP date, RFC 9110 §10.2.3) or else the RateLimit-Reset header (Unix
	// seconds, GitLab's rate-limit headers) asks for. No wait exceeds RetryWaitMax.
	// Zero values mean DefaultRetryWaitMin and DefaultRetryWaitMax.
	RetryWaitMin time.Duration `json:"retry_wait_min,omitempty"`
	RetryWaitMax time.Duration `json:"retry_wait_max,omitempty"`
}

// Client is the outbound forge.Forge for one GitLab instance, on the REST v4 API through
// gitlab.com/gitlab-org/api/client-go. A repository is the project's full path
// ("group/sub/name"), sent URL-escaped as the project ID. Errors wrap forge.ErrNotFound
// (404), forge.ErrForbidden (401/403) or forge.ErrConflict (409/422), keep GitLab's message
// and never contain the token. It is safe for concurrent use.
type Client struct {
	api   *gl.Client
	token string

	mu  sync.Mutex
	bot *forge.User // cached answer of GET /user
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
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	waitMin := cfg.RetryWaitMin
	if waitMin <= 0 {
		waitMin = DefaultRetryWaitMin
	}
	waitMax := cfg.RetryWaitMax
	if waitMax <= 0 {
		waitMax = DefaultRetryWaitMax
	}
	waitMax = max(waitMax, waitMin)

	opts := []gl.ClientOptionFunc{
		gl.WithBaseURL(cfg.BaseURL),
		gl.WithCustomRetryMax(retries),
		gl.WithCustomRetryWaitMinMax(waitMin, waitMax),
		gl.WithCustomBackoff(forgehttp.Backoff),
		gl.WithCustomRetry(forgehttp.CheckRetry),
		gl.WithUserAgent("alfred"),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, gl.WithHTTPClient(cfg.HTTPClient))
	}
	api, err := gl.NewClient(cfg.Token, opts...)
	if err != nil {
		return nil, fmt.Errorf("gitlab: new client: %s", censor.New(censor.Config{Secrets: []string{cfg.Token}}).String(err.Error()))
	}
	return &Client{api: api, token: cfg.Token}, nil
}

// Kind returns forge.KindGitLab.
func (c *Client) Kind() forge.Kind { return forge.KindGitLab }

// BotUser returns the token's account (GET /user). The first success is cached.
func (c *Client) BotUser(ctx context.Context) (forge.User, error) {
	c.mu.Lock()
	if c.bot != nil {
		u := *c.bot
		c.mu.Unlock()
		return u, nil
	}
	c.mu.Unlock()
	u, resp, err := c.api.Users.CurrentUser(gl.WithContext(ctx))
	if err != nil {
		return forge.User{}, c.wrap("get current user", resp, err)
	}
	bot := forge.User{ID: u.ID, Login: u.Username, Bot: u.Bot}
	c.mu.Lock()
	c.bot = &bot
	c.mu.Unlock()
	return bot, nil
}

// userID resolves a username with GET /users?username=; ok is false when no account has it.
func (c *Client) userID(ctx context.Context, login string) (id int64, ok bool, err error) {
	users, resp, err := c.api.Users.ListUsers(&gl.ListUsersOptions{Username: gl.Ptr(login)}, gl.WithContext(ctx))
	if err != nil {
		return 0, false, c.wrap("find user "+login, resp, err)
	}
	for _, u := range users {
		if strings.EqualFold(u.Username, login) {
			return u.ID, true, nil
		}
	}
	return 0, false, nil
}

// CanWrite reports whether login is a member of the project, directly or through its groups
// (GET /projects/:id/members/all/:user_id), with at least the Developer role (access level 30).
// An unknown login or a non-member is false with a nil error.
func (c *Client) CanWrite(ctx context.Context, repo, login string) (bool, error) {
	id, ok, err := c.userID(ctx, login)
	if err != nil || !ok {
		return false, err
	}
	m, resp, err := c.api.ProjectMembers.GetInheritedProjectMember(repo, id, gl.WithContext(ctx))
	if err != nil {
		if clientStatus(resp, err) == http.StatusNotFound {
			// GitLab answers 404 for a non-member; tell it apart from a missing project.
			if _, err := c.Repository(ctx, repo); err != nil {
				return false, err
			}
			return false, nil
		}
		return false, c.wrap("get member "+login+" of "+repo, resp, err)
	}
	return m.AccessLevel >= gl.DeveloperPermissions, nil
}

// Repository returns the project's path, default branch and http_url_to_repo.
func (c *Client) Repository(ctx context.Context, repo string) (*forge.Repository, error) {
	p, resp, err := c.api.Projects.GetProject(repo, nil, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("get project "+repo, resp, err)
	}
	return &forge.Repository{Path: p.PathWithNamespace, DefaultBranch: p.DefaultBranch, CloneURL: p.HTTPURLToRepo}, nil
}

// Issue reads an issue, or a merge request when ref.MergeRequest. GitLab's "opened" becomes
// "open"; a merged merge request reads "closed" here (see MergeRequest for "merged").
func (c *Client) Issue(ctx context.Context, ref forge.IssueRef) (*forge.Issue, error) {
	if ref.MergeRequest {
		mr, resp, err := c.api.MergeRequests.GetMergeRequest(ref.Repo, ref.Number, nil, gl.WithContext(ctx))
		if err != nil {
			return nil, c.wrap("get merge request "+ref.String(), resp, err)
		}
		is := &forge.Issue{
			Ref: ref, Title: mr.Title, Body: mr.Description, State: clientIssueState(mr.State),
			Labels: clientNonNil(mr.Labels), WebURL: mr.WebURL, Assignees: []string{},
		}
		if mr.Author != nil {
			is.Author = forge.User{ID: mr.Author.ID, Login: mr.Author.Username}
		}
		for _, a := range mr.Assignees {
			is.Assignees = append(is.Assignees, a.Username)
		}
		return is, nil
	}
	gi, resp, err := c.api.Issues.GetIssue(ref.Repo, ref.Number, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("get issue "+ref.String(), resp, err)
	}
	is := &forge.Issue{
		Ref: ref, Title: gi.Title, Body: gi.Description, State: clientIssueState(gi.State),
		Labels: clientNonNil(gi.Labels), WebURL: gi.WebURL, Assignees: []string{},
	}
	if gi.Author != nil {
		is.Author = forge.User{ID: gi.Author.ID, Login: gi.Author.Username}
	}
	for _, a := range gi.Assignees {
		is.Assignees = append(is.Assignees, a.Username)
	}
	return is, nil
}

func clientIssueState(s string) string {
	switch s {
	case "opened", "locked":
		return "open"
	case "merged":
		return "closed"
	}
	return s
}

func clientNonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// update sends PUT /projects/:id/issues/:iid (or merge_requests/:iid) with the fields that
// both endpoints share.
func (c *Client) update(ctx context.Context, ref forge.IssueRef, op string, desc *string, add, remove *gl.LabelOptions, assignees *[]int64) error {
	if ref.MergeRequest {
		_, resp, err := c.api.MergeRequests.UpdateMergeRequest(ref.Repo, ref.Number, &gl.UpdateMergeRequestOptions{
			Description: desc, AddLabels: add, RemoveLabels: remove, AssigneeIDs: assignees,
		}, gl.WithContext(ctx))
		if err != nil {
			return c.wrap(op+" "+ref.String(), resp, err)
		}
		return nil
	}
	_, resp, err := c.api.Issues.UpdateIssue(ref.Repo, ref.Number, &gl.UpdateIssueOptions{
		Description: desc, AddLabels: add, RemoveLabels: remove, AssigneeIDs: assignees,
	}, gl.WithContext(ctx))
	if err != nil {
		return c.wrap(op+" "+ref.String(), resp, err)
	}
	return nil
}

// SetIssueBody replaces the description of the issue (or merge request).
func (c *Client) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	return c.update(ctx, ref, "set description of", &body, nil, nil, nil)
}

// Comments lists the notes of the issue (or merge request) oldest first, following every
// page (X-Next-Page / Link rel="next"), without system notes ("added label …").
func (c *Client) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	var (
		out  []forge.Comment
		page gl.RequestOptionFunc
	)
	for {
		var (
			notes []*gl.Note
			resp  *gl.Response
			err   error
		)
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		lo := gl.ListOptions{PerPage: 100}
		if ref.MergeRequest {
			notes, resp, err = c.api.Notes.ListMergeRequestNotes(ref.Repo, ref.Number, &gl.ListMergeRequestNotesOptions{
				ListOptions: lo, OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"),
			}, reqOpts...)
		} else {
			notes, resp, err = c.api.Notes.ListIssueNotes(ref.Repo, ref.Number, &gl.ListIssueNotesOptions{
				ListOptions: lo, OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"),
			}, reqOpts...)
		}
		if err != nil {
			return nil, c.wrap("list notes of "+ref.String(), resp, err)
		}
		for _, n := range notes {
			if n.System {
				continue
			}
			cm := forge.Comment{ID: n.ID, Body: n.Body, Author: forge.User{ID: n.Author.ID, Login: n.Author.Username}}
			if n.CreatedAt != nil {
				cm.CreatedAt = *n.CreatedAt
			}
			if n.UpdatedAt != nil {
				cm.UpdatedAt = *n.UpdatedAt
			}
			out = append(out, cm)
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(notes) == 0 {
			break
		}
		page = next
	}
	slices.SortStableFunc(out, func(a, b forge.Comment) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return out, nil
}

// Comment posts a note on the issue (or merge request) and returns the note id.
func (c *Client) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	var (
		n    *gl.Note
		resp *gl.Response
		err  error
	)
	if ref.MergeRequest {
		n, resp, err = c.api.Notes.CreateMergeRequestNote(ref.Repo, ref.Number, &gl.CreateMergeRequestNoteOptions{Body: &body}, gl.WithContext(ctx))
	} else {
		n, resp, err = c.api.Notes.CreateIssueNote(ref.Repo, ref.Number, &gl.CreateIssueNoteOptions{Body: &body}, gl.WithContext(ctx))
	}
	if err != nil {
		return 0, c.wrap("comment on "+ref.String(), resp, err)
	}
	return n.ID, nil
}

// EditComment replaces the body of note id on the issue (or merge request).
func (c *Client) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	var (
		resp *gl.Response
		err  error
	)
	if ref.MergeRequest {
		_, resp, err = c.api.Notes.UpdateMergeRequestNote(ref.Repo, ref.Number, id, &gl.UpdateMergeRequestNoteOptions{Body: &body}, gl.WithContext(ctx))
	} else {
		_, resp, err = c.api.Notes.UpdateIssueNote(ref.Repo, ref.Number, id, &gl.UpdateIssueNoteOptions{Body: &body}, gl.WithContext(ctx))
	}
	if err != nil {
		return c.wrap(fmt.Sprintf("edit note %d of %s", id, ref), resp, err)
	}
	return nil
}

// SetLabels adds and removes labels by name in one update (add_labels / remove_labels). Before
// that it creates the missing project labels with EnsureLabels: GitLab would create them too,
// but doing it here makes the outcome explicit. A name in both add and remove is added. Note
// that on GitLab Premium adding a scoped label ("a::b") removes the other labels of its scope.
func (c *Client) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	add = clientUniq(add)
	remove = slices.DeleteFunc(clientUniq(remove), func(s string) bool { return slices.Contains(add, s) })
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	if err := c.EnsureLabels(ctx, ref.Repo, add); err != nil {
		return err
	}
	var a, r *gl.LabelOptions
	if len(add) > 0 {
		a = (*gl.LabelOptions)(&add)
	}
	if len(remove) > 0 {
		r = (*gl.LabelOptions)(&remove)
	}
	return c.update(ctx, ref, "set labels of", nil, a, r, nil)
}

// EnsureLabels creates, with LabelColor, the names that neither the project nor its ancestor
// groups have: it lists the labels available to the project (GET /projects/:id/labels with
// include_ancestor_groups, every page), then creates each missing one as a project label
// (POST /projects/:id/labels). A 409 "Label already exists" (created meanwhile) counts as
// success. Existing labels are not modified; empty and repeated names are skipped, and no
// names makes no request.
func (c *Client) EnsureLabels(ctx context.Context, repo string, names []string) error {
	names = clientUniq(names)
	if len(names) == 0 {
		return nil
	}
	have := map[string]bool{}
	var page gl.RequestOptionFunc
	for {
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		labels, resp, err := c.api.Labels.ListLabels(repo, &gl.ListLabelsOptions{
			ListOptions: gl.ListOptions{PerPage: 100}, IncludeAncestorGroups: gl.Ptr(true),
		}, reqOpts...)
		if err != nil {
			return c.wrap("list labels of "+repo, resp, err)
		}
		for _, l := range labels {
			have[l.Name] = true
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(labels) == 0 {
			break
		}
		page = next
	}
	for _, n := range names {
		if have[n] {
			continue
		}
		_, resp, err := c.api.Labels.CreateLabel(repo, &gl.CreateLabelOptions{Name: gl.Ptr(n), Color: gl.Ptr(LabelColor)}, gl.WithContext(ctx))
		if err != nil && clientStatus(resp, err) != http.StatusConflict { // 409: created meanwhile
			return c.wrap(fmt.Sprintf("create label %q in %s", n, repo), resp, err)
		}
	}
	return nil
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

// SetAssignees reads the current assignees, resolves the added logins to user ids
// (GET /users?username=) and sends the resulting full set as assignee_ids (an empty set as
// [0], GitLab's "unassign all"). An unknown login is an error wrapping forge.ErrNotFound.
// GitLab Free keeps only the first assignee. A concurrent edit between the read and the write
// is overwritten.
func (c *Client) SetAssignees(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	type assignee struct {
		id    int64
		login string
	}
	var cur []assignee
	if ref.MergeRequest {
		mr, resp, err := c.api.MergeRequests.GetMergeRequest(ref.Repo, ref.Number, nil, gl.WithContext(ctx))
		if err != nil {
			return c.wrap("get merge request "+ref.String(), resp, err)
		}
		for _, a := range mr.Assignees {
			cur = append(cur, assignee{a.ID, a.Username})
		}
	} else {
		gi, resp, err := c.api.Issues.GetIssue(ref.Repo, ref.Number, gl.WithContext(ctx))
		if err != nil {
			return c.wrap("get issue "+ref.String(), resp, err)
		}
		for _, a := range gi.Assignees {
			cur = append(cur, assignee{a.ID, a.Username})
		}
	}
	has := func(set []assignee, login string) bool {
		return slices.ContainsFunc(set, func(a assignee) bool { return strings.EqualFold(a.login, login) })
	}
	next := slices.DeleteFunc(slices.Clone(cur), func(a assignee) bool {
		return slices.ContainsFunc(remove, func(r string) bool { return strings.EqualFold(r, a.login) })
	})
	for _, login := range clientUniq(add) {
		if has(next, login) {
			continue
		}
		id, ok, err := c.userID(ctx, login)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("gitlab: set assignees of %s: user %q: %w", ref, login, forge.ErrNotFound)
		}
		next = append(next, assignee{id, login})
	}
	if len(next) == len(cur) && !slices.ContainsFunc(next, func(a assignee) bool { return !has(cur, a.login) }) {
		return nil
	}
	ids := []int64{0}
	if len(next) > 0 {
		ids = ids[:0]
		for _, a := range next {
			ids = append(ids, a.id)
		}
	}
	return c.update(ctx, ref, "set assignees of", nil, nil, nil, &ids)
}

// CreateMergeRequest returns the open merge request of mr.SourceBranch if there is one,
// else opens a new one (an empty TargetBranch means the default branch). When GitLab
// answers 409 because one was opened meanwhile, it returns that one.
func (c *Client) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	if existing, err := c.openMergeRequest(ctx, repo, mr.SourceBranch); err != nil || existing != nil {
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
	created, resp, err := c.api.MergeRequests.CreateMergeRequest(repo, &gl.CreateMergeRequestOptions{
		Title: gl.Ptr(mr.Title), Description: gl.Ptr(mr.Body),
		SourceBranch: gl.Ptr(mr.SourceBranch), TargetBranch: gl.Ptr(target),
	}, gl.WithContext(ctx))
	if err != nil {
		if clientStatus(resp, err) == http.StatusConflict {
			if existing, err2 := c.openMergeRequest(ctx, repo, mr.SourceBranch); err2 == nil && existing != nil {
				return existing, nil
			}
		}
		return nil, c.wrap("create merge request for "+mr.SourceBranch+" in "+repo, resp, err)
	}
	return clientMergeRequest(&created.BasicMergeRequest), nil
}

// openMergeRequest finds the open merge request whose source branch is branch, or nil.
func (c *Client) openMergeRequest(ctx context.Context, repo, branch string) (*forge.MergeRequest, error) {
	list, resp, err := c.api.MergeRequests.ListProjectMergeRequests(repo, &gl.ListProjectMergeRequestsOptions{
		ListOptions: gl.ListOptions{PerPage: 100}, State: gl.Ptr("opened"), SourceBranch: gl.Ptr(branch),
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("list merge requests of "+repo, resp, err)
	}
	for _, m := range list {
		if m.SourceBranch == branch && m.State == "opened" {
			return clientMergeRequest(m), nil
		}
	}
	return nil, nil
}

// MergeRequest reads a merge request by iid. State is "open", "closed" or "merged".
func (c *Client) MergeRequest(ctx context.Context, repo string, number int64) (*forge.MergeRequest, error) {
	mr, resp, err := c.api.MergeRequests.GetMergeRequest(repo, number, nil, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get merge request %s!%d", repo, number), resp, err)
	}
	return clientMergeRequest(&mr.BasicMergeRequest), nil
}

func clientMergeRequest(m *gl.BasicMergeRequest) *forge.MergeRequest {
	out := &forge.MergeRequest{
		Number: m.IID, Title: m.Title, Body: m.Description, SourceBranch: m.SourceBranch,
		TargetBranch: m.TargetBranch, HeadSHA: m.SHA, WebURL: m.WebURL,
	}
	switch m.State {
	case "opened", "locked":
		out.State = "open"
	case "merged":
		out.State, out.Merged = "merged", true
	default:
		out.State = m.State
	}
	if m.Author != nil {
		out.Author = forge.User{ID: m.Author.ID, Login: m.Author.Username}
	}
	return out
}

var clientMRRef = regexp.MustCompile(`^refs/merge-requests/(\d+)/`)

// CIStatus returns the latest pipeline for sha (GET /projects/:id/pipelines?sha=, highest id).
// GitLab "success" is CISuccess, "failed" and "canceled" CIFailed, "skipped" and "manual"
// CISkipped, anything else (created, waiting_for_resource, preparing, pending, running,
// scheduled) CIPending; no pipeline is CINone. For CIFailed it lists the failed jobs (except
// allow_failure ones) with the last LogTailBytes of each job's trace; a trace it cannot read
// leaves Log empty.
func (c *Client) CIStatus(ctx context.Context, repo, sha string) (*forge.Pipeline, error) {
	list, resp, err := c.api.Pipelines.ListProjectPipelines(repo, &gl.ListProjectPipelinesOptions{
		ListOptions: gl.ListOptions{PerPage: 1}, SHA: gl.Ptr(sha), OrderBy: gl.Ptr("id"), Sort: gl.Ptr("desc"),
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("list pipelines of "+repo+"@"+sha, resp, err)
	}
	if len(list) == 0 {
		return &forge.Pipeline{State: forge.CINone, SHA: sha}, nil
	}
	p := list[0]
	out := &forge.Pipeline{ID: p.ID, SHA: p.SHA, Ref: p.Ref, WebURL: p.WebURL}
	if m := clientMRRef.FindStringSubmatch(p.Ref); m != nil {
		out.MergeRequest, _ = strconv.ParseInt(m[1], 10, 64)
	}
	switch p.Status {
	case "success":
		out.State = forge.CISuccess
	case "failed", "canceled", "cancelled":
		out.State = forge.CIFailed
	case "skipped", "manual":
		out.State = forge.CISkipped
	default:
		out.State = forge.CIPending
	}
	if out.State != forge.CIFailed {
		return out, nil
	}
	var page gl.RequestOptionFunc
	for {
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		jobs, resp, err := c.api.Jobs.ListPipelineJobs(repo, p.ID, &gl.ListJobsOptions{
			ListOptions: gl.ListOptions{PerPage: 100}, Scope: &[]gl.BuildStateValue{gl.Failed},
		}, reqOpts...)
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("list failed jobs of pipeline %d in %s", p.ID, repo), resp, err)
		}
		for _, j := range jobs {
			if j.AllowFailure || j.Status != string(gl.Failed) {
				continue
			}
			log, err := c.traceTail(ctx, repo, j.ID)
			if err != nil && ctx.Err() != nil {
				return nil, c.wrap("read job trace", nil, ctx.Err())
			}
			out.FailedJobs = append(out.FailedJobs, forge.FailedJob{Name: j.Name, WebURL: j.WebURL, Log: log})
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(jobs) == 0 {
			break
		}
		page = next
	}
	return out, nil
}

// traceTail streams GET /projects/:id/jobs/:job_id/trace keeping only the last LogTailBytes.
func (c *Client) traceTail(ctx context.Context, repo string, job int64) (string, error) {
	req, err := c.api.NewRequest(http.MethodGet, fmt.Sprintf("projects/%s/jobs/%d/trace", gl.PathEscape(repo), job), nil,
		[]gl.RequestOptionFunc{gl.WithContext(ctx)})
	if err != nil {
		return "", err
	}
	tw := &clientTail{max: LogTailBytes}
	if _, err := c.api.Do(req, tw); err != nil {
		return "", err
	}
	return string(tw.buf), nil
}

// clientTail is an io.Writer keeping the last max bytes written to it.
type clientTail struct {
	max int
	buf []byte
}

func (t *clientTail) Write(p []byte) (int, error) {
	n := len(p)
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return n, nil
}

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

// wrap turns a client-go error into a *clientError naming the operation, matching a forge
// sentinel by status, and with the token removed from the message.
func (c *Client) wrap(op string, resp *gl.Response, err error) error {
	status := clientStatus(resp, err)
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
	if e.sentinel != nil {
		return "gitlab: " + e.op + ": " + e.sentinel.Error() + ": " + e.msg
	}
	return "gitlab: " + e.op + ": " + e.msg
}

func (e *clientError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.cause}
	}
	return []error{e.sentinel, e.cause}
}
