package forgejo

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// The payload types below are lenient versions of Gitea's modules/structs hook payloads
// (IssuePayload, PullRequestPayload, IssueCommentPayload, CommitStatusPayload), which the
// code.gitea.io/sdk/gitea module does not export. Only what Alfred reads is declared. Ids are
// int64; lists may be null; users may be trimmed to a login string; times that do not parse are
// zero instead of an error.

// hookBody is the union of the payloads Alfred reads; the event header says which parts are set.
type hookBody struct {
	Action      string       `json:"action"`
	Number      int64        `json:"number"`
	CommitID    string       `json:"commit_id"` // issues: the merge commit that closed the issue
	IsPull      *bool        `json:"is_pull"`   // comments; absent on old Gitea
	Issue       *hookIssue   `json:"issue"`
	PullRequest *hookPull    `json:"pull_request"`
	Comment     *hookComment `json:"comment"`
	Review      *hookReview  `json:"review"`
	// RequestedReviewer is the account asked (review_requested) or, in a review delivery, the
	// reviewer itself.
	RequestedReviewer *hookUser `json:"requested_reviewer"`
	Repository        struct {
		FullName string   `json:"full_name"`
		Name     string   `json:"name"`
		Owner    hookUser `json:"owner"`
	} `json:"repository"`
	Sender hookUser `json:"sender"`

	// CommitStatusPayload ("status" events, Gitea only).
	ID        int64    `json:"id"`
	SHA       string   `json:"sha"`
	State     string   `json:"state"`
	Context   string   `json:"context"`
	TargetURL string   `json:"target_url"`
	CreatedAt hookTime `json:"created_at"`
	UpdatedAt hookTime `json:"updated_at"`
}

type hookIssue struct {
	Number      int64                  `json:"number"`
	User        hookUser               `json:"user"`
	Title       string                 `json:"title"`
	Body        string                 `json:"body"`
	State       string                 `json:"state"`
	Labels      hookList[hookLabel]    `json:"labels"`
	Assignee    *hookUser              `json:"assignee"`
	Assignees   hookList[hookUser]     `json:"assignees"`
	PullRequest *struct{ Merged bool } `json:"pull_request"` // non-null when the issue is a PR
	UpdatedAt   hookTime               `json:"updated_at"`
}

type hookPull struct {
	Number         int64               `json:"number"`
	User           hookUser            `json:"user"`
	Title          string              `json:"title"`
	Body           string              `json:"body"`
	State          string              `json:"state"`
	Labels         hookList[hookLabel] `json:"labels"`
	Assignee       *hookUser           `json:"assignee"`
	Assignees      hookList[hookUser]  `json:"assignees"`
	Head           hookBranch          `json:"head"`
	Base           hookBranch          `json:"base"`
	Merged         bool                `json:"merged"`
	MergeCommitSHA string              `json:"merge_commit_sha"`
	HTMLURL        string              `json:"html_url"`
	UpdatedAt      hookTime            `json:"updated_at"`
}

type hookBranch struct {
	Ref    string `json:"ref"`
	SHA    string `json:"sha"`
	RepoID int64  `json:"repo_id"`
}

type hookComment struct {
	ID        int64    `json:"id"`
	Body      string   `json:"body"`
	User      hookUser `json:"user"`
	CreatedAt hookTime `json:"created_at"`
	UpdatedAt hookTime `json:"updated_at"`
}

type hookReview struct {
	Type    string `json:"type"` // pull_request_review_approved / _rejected / _comment
	Content string `json:"content"`
}

// hookUser is a user object, or a bare login string in trimmed payloads.
type hookUser struct {
	ID       int64
	Login    string
	Username string
}

func (u *hookUser) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		return nil
	case b[0] == '"':
		return json.Unmarshal(b, &u.Login)
	}
	var raw struct {
		ID       int64  `json:"id"`
		Login    string `json:"login"`
		Username string `json:"username"`
	}
	err := json.Unmarshal(b, &raw)
	u.ID, u.Login, u.Username = raw.ID, raw.Login, raw.Username
	if hookIsTypeError(err) {
		return nil
	}
	return err
}

func (u hookUser) user() forge.User {
	login := u.Login
	if login == "" {
		login = u.Username
	}
	return forge.User{ID: u.ID, Login: login}
}

// hookLabel is a label object, or a bare name string.
type hookLabel struct{ Name string }

func (l *hookLabel) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &l.Name)
	}
	var raw struct {
		Name string `json:"name"`
	}
	err := json.Unmarshal(b, &raw)
	l.Name = raw.Name
	if hookIsTypeError(err) {
		return nil
	}
	return err
}

// hookList is a JSON array that remembers whether its key was present; null counts as present
// and empty (Forgejo sends "assignees": null after the last unassign).
type hookList[T any] struct {
	Present bool
	Items   []T
}

func (l *hookList[T]) UnmarshalJSON(b []byte) error {
	l.Present = true
	l.Items = nil
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	err := json.Unmarshal(b, &l.Items)
	if hookIsTypeError(err) {
		return nil
	}
	return err
}

// hookTime is a timestamp that decodes to the zero time instead of failing, and for a year JSON
// cannot write (forge.StorableTime).
type hookTime time.Time

func (t *hookTime) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	if v, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
		*t = hookTime(forge.StorableTime(v.UTC()))
	}
	return nil
}

func (t hookTime) time() time.Time { return time.Time(t) }

func hookIsTypeError(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr)
}

func hookLabelNames(l hookList[hookLabel]) []string {
	var out []string
	for _, x := range l.Items {
		if x.Name != "" {
			out = append(out, x.Name)
		}
	}
	return out
}

func hookLogins(l hookList[hookUser], single *hookUser) []string {
	var out []string
	for _, u := range l.Items {
		if login := u.user().Login; login != "" {
			out = append(out, login)
		}
	}
	if !l.Present && single != nil && single.user().Login != "" {
		out = append(out, single.user().Login)
	}
	return out
}

// parseHook decodes the payload and routes on the event name (fine-grained when fine is true,
// else the coarse X-Gitea-Event value). ev carries Kind, Header and DeliveryID.
func parseHook(ev forge.Event, body []byte, fine bool) (forge.Event, error) {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return ev, fmt.Errorf("%w: %s body is not a JSON object", forge.ErrBadPayload, ev.Header)
	}
	var p hookBody
	// A value of the wrong type is skipped and the rest decoded; only broken JSON fails.
	if err := decodeHook(body, &p); err != nil && !hookIsTypeError(err) {
		return ev, fmt.Errorf("%w: decoding %s body: %v", forge.ErrBadPayload, ev.Header, err)
	}
	return routeHook(ev, &p, fine)
}

// routeHook fills ev from the decoded payload p and routes on ev.Header, as parseHook describes.
func routeHook(ev forge.Event, p *hookBody, fine bool) (forge.Event, error) {
	ev.Action = p.Action
	ev.Sender = p.Sender.user()
	ev.Target.Repo = p.Repository.FullName
	if ev.Target.Repo == "" && p.Repository.Name != "" && p.Repository.Owner.user().Login != "" {
		ev.Target.Repo = p.Repository.Owner.user().Login + "/" + p.Repository.Name
	}

	switch name := ev.Header; name {
	case "issues", "issue_assign", "issue_label", "issue_milestone":
		if p.Issue == nil && p.PullRequest != nil {
			return parsePull(ev, p)
		}
		return parseIssue(ev, p)
	case "issue_comment", "pull_request_comment":
		// Real Gitea sends a PR conversation comment as issue_comment / pull_request_comment, but
		// a review comment with the coarse X-Gitea-Event "pull_request_comment": the body tells.
		if p.Comment == nil && p.Review != nil {
			return parseReview(ev, p)
		}
		return parseComment(ev, p, fine && name == "pull_request_comment")
	case "pull_request", "pull_request_assign", "pull_request_label", "pull_request_milestone",
		"pull_request_sync", "pull_request_review_request":
		return parsePull(ev, p)
	case "pull_request_approved", "pull_request_rejected", "pull_request_review_approved",
		"pull_request_review_rejected", "pull_request_review_comment", "pull_request_review":
		return parseReview(ev, p)
	case "status":
		return parseStatus(ev, p)
	default: // push, create, delete, fork, release, repository, wiki, package, workflow_*, …
		return ev, forge.Ignore(name, "%s events are not used", name)
	}
}

func hookRequireTarget(ev forge.Event, what string) error {
	if ev.Target.Repo == "" || ev.Target.Number <= 0 {
		return fmt.Errorf("%w: %s without repository full_name or number", forge.ErrBadPayload, what)
	}
	return nil
}

// fillIssue copies the issue's fields into ev.
func fillIssue(ev *forge.Event, p *hookBody) {
	is := p.Issue
	ev.Target.Number = cmp.Or(is.Number, p.Number)
	ev.Title, ev.Body, ev.State = is.Title, is.Body, is.State
	ev.Author = is.User.user()
	if is.Labels.Present {
		ev.LabelsKnown, ev.Labels = true, hookLabelNames(is.Labels)
	}
	if is.Assignees.Present {
		ev.AssigneesKnown, ev.Assignees = true, hookLogins(is.Assignees, nil)
	}
	ev.OccurredAt = is.UpdatedAt.time()
}

// fillPull copies the pull request's fields into ev and ev.MergeRequest.
func fillPull(ev *forge.Event, p *hookBody) {
	pr := p.PullRequest
	ev.Target.Number, ev.Target.MergeRequest = cmp.Or(pr.Number, p.Number), true
	ev.Title, ev.Body, ev.State = pr.Title, pr.Body, pr.State
	if pr.Merged {
		ev.State = "closed"
	}
	ev.Author = pr.User.user()
	if pr.Labels.Present {
		ev.LabelsKnown, ev.Labels = true, hookLabelNames(pr.Labels)
	}
	if pr.Assignees.Present {
		ev.AssigneesKnown, ev.Assignees = true, hookLogins(pr.Assignees, nil)
	}
	ev.MergeRequest = hookMergeRequest(pr, ev.Target.Number)
	ev.OccurredAt = pr.UpdatedAt.time()
}

// hookMergeRequest converts a pull request object; number is used when the object lacks one.
func hookMergeRequest(pr *hookPull, number int64) *forge.MergeRequest {
	state := pr.State
	if pr.Merged {
		state = "merged"
	}
	return &forge.MergeRequest{
		Number: cmp.Or(pr.Number, number), Title: pr.Title, Body: pr.Body,
		SourceBranch: pr.Head.Ref, TargetBranch: pr.Base.Ref, HeadSHA: pr.Head.SHA,
		State: state, Merged: pr.Merged, WebURL: pr.HTMLURL, Author: pr.User.user(),
		FromFork: pr.Head.RepoID != 0 && pr.Base.RepoID != 0 && pr.Head.RepoID != pr.Base.RepoID,
	}
}

func parseIssue(ev forge.Event, p *hookBody) (forge.Event, error) {
	if p.Issue == nil {
		return ev, fmt.Errorf("%w: %s event without issue", forge.ErrBadPayload, ev.Header)
	}
	fillIssue(&ev, p)
	if err := hookRequireTarget(ev, "issue event"); err != nil {
		return ev, err
	}
	switch p.Action {
	case "opened":
		ev.Type = forge.EventIssueOpened
	case "edited":
		ev.Type = forge.EventIssueEdited
	case "closed":
		ev.Type = forge.EventIssueClosed
		ev.ClosedByCommit = p.CommitID
	case "reopened":
		ev.Type = forge.EventIssueReopened
	case "assigned", "unassigned":
		// Only the list after the change is sent; null means nobody.
		ev.Type = forge.EventAssignees
		ev.AssigneesKnown, ev.Assignees = true, hookLogins(p.Issue.Assignees, p.Issue.Assignee)
	case "label_updated":
		// Adding and removing both send label_updated with the full list after the change.
		ev.Type = forge.EventLabels
		ev.LabelsKnown, ev.Labels = true, hookLabelNames(p.Issue.Labels)
	case "label_cleared":
		ev.Type = forge.EventLabels
		ev.LabelsKnown, ev.Labels = true, nil
	case "milestoned", "demilestoned":
		return ev, forge.Ignore(ev.Header, "milestones are not used")
	default:
		return ev, forge.Ignore(ev.Header, "issue action %q is not used", p.Action)
	}
	return ev, nil
}

func parseComment(ev forge.Event, p *hookBody, prHeader bool) (forge.Event, error) {
	if p.Issue == nil || p.Comment == nil {
		return ev, fmt.Errorf("%w: %s event without issue or comment", forge.ErrBadPayload, ev.Header)
	}
	fillIssue(&ev, p)
	// is_pull is missing on old Gitea; issue.pull_request is non-null on a PR there too.
	ev.Target.MergeRequest = (p.IsPull != nil && *p.IsPull) || p.Issue.PullRequest != nil || prHeader
	if p.PullRequest != nil && ev.Target.MergeRequest {
		// Newer Gitea and Forgejo add the full pull request next to the issue stub.
		ev.MergeRequest = hookMergeRequest(p.PullRequest, ev.Target.Number)
	}
	if err := hookRequireTarget(ev, "comment event"); err != nil {
		return ev, err
	}
	c := p.Comment
	ev.Comment = &forge.Comment{
		ID: c.ID, Body: c.Body, Author: c.User.user(),
		CreatedAt: c.CreatedAt.time(), UpdatedAt: c.UpdatedAt.time(),
	}
	ev.OccurredAt = c.UpdatedAt.time()
	switch p.Action {
	case "created":
		ev.Type = forge.EventComment
	case "edited":
		ev.Type = forge.EventCommentEdited
	case "deleted":
		return ev, forge.Ignore(ev.Header, "deleted comments are not used")
	default:
		return ev, forge.Ignore(ev.Header, "comment action %q is not used", p.Action)
	}
	return ev, nil
}

// pullTarget fills ev from the body's pull request and checks it names a target; what names the
// event in the error.
func pullTarget(ev *forge.Event, p *hookBody, what string) error {
	if p.PullRequest == nil {
		return fmt.Errorf("%w: %s event without pull_request", forge.ErrBadPayload, ev.Header)
	}
	fillPull(ev, p)
	return hookRequireTarget(*ev, what)
}

func parsePull(ev forge.Event, p *hookBody) (forge.Event, error) {
	if err := pullTarget(&ev, p, "pull request event"); err != nil {
		return ev, err
	}
	pr := p.PullRequest
	switch p.Action {
	case "opened", "reopened":
		ev.Type = forge.EventMergeRequestOpened
	case "synchronized":
		ev.Type = forge.EventMergeRequestUpdated
	case "closed":
		// A merge is "closed" with merged: true; there is no "merged" action.
		ev.Type = forge.EventMergeRequestClosed
		if pr.Merged {
			ev.Type = forge.EventMergeRequestMerged
		}
	case "assigned", "unassigned":
		ev.Type = forge.EventAssignees
		ev.AssigneesKnown, ev.Assignees = true, hookLogins(pr.Assignees, pr.Assignee)
	case "label_updated":
		ev.Type = forge.EventLabels
		ev.LabelsKnown, ev.Labels = true, hookLabelNames(pr.Labels)
	case "label_cleared":
		ev.Type = forge.EventLabels
		ev.LabelsKnown, ev.Labels = true, nil
	case "reviewed":
		return parseReview(ev, p)
	case "edited":
		return ev, forge.Ignore(ev.Header, "pull request edits (title, body, base branch) are not used")
	case "milestoned", "demilestoned":
		return ev, forge.Ignore(ev.Header, "milestones are not used")
	case "review_requested":
		if p.RequestedReviewer == nil || p.RequestedReviewer.user().Login == "" {
			return ev, forge.Ignore(ev.Header, "review request without requested_reviewer (a team request) is not used")
		}
		ev.Type = forge.EventReviewRequested
		ev.ReviewRequested = []string{p.RequestedReviewer.user().Login}
	case "review_request_removed":
		return ev, forge.Ignore(ev.Header, "withdrawn review requests are not used")
	default:
		return ev, forge.Ignore(ev.Header, "pull request action %q is not used", p.Action)
	}
	return ev, nil
}

func parseReview(ev forge.Event, p *hookBody) (forge.Event, error) {
	if err := pullTarget(&ev, p, "review event"); err != nil {
		return ev, err
	}
	kind := ev.Header
	var body string
	if p.Review != nil {
		kind, body = cmp.Or(p.Review.Type, kind), p.Review.Content
	}
	var state string
	switch {
	case strings.Contains(kind, "approved"):
		state = "approved"
	case strings.Contains(kind, "rejected"):
		state = "changes_requested"
	case strings.Contains(kind, "comment"):
		state = "commented"
	default:
		return ev, forge.Ignore(ev.Header, "review type %q is not used", kind)
	}
	ev.Type = forge.EventReview
	ev.Review = &forge.Review{State: state, Body: body}
	return ev, nil
}

func parseStatus(ev forge.Event, p *hookBody) (forge.Event, error) {
	if ev.Target.Repo == "" || p.SHA == "" {
		return ev, fmt.Errorf("%w: status event without repository full_name or sha", forge.ErrBadPayload)
	}
	ev.Action = p.State
	ev.Type = forge.EventPipeline
	ev.Pipeline = &forge.Pipeline{ID: p.ID, State: hookCIState(p.State), SHA: p.SHA, WebURL: p.TargetURL}
	ev.OccurredAt = p.UpdatedAt.time()
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = p.CreatedAt.time()
	}
	return ev, nil
}

// hookCIState maps a Gitea commit status state to a CIState. "warning" does not block a
// merge in Gitea, so it counts as success.
func hookCIState(s string) forge.CIState {
	switch s {
	case "success", "warning":
		return forge.CISuccess
	case "failure", "error":
		return forge.CIFailed
	case "skipped":
		return forge.CISkipped
	default: // pending, unknown
		return forge.CIPending
	}
}
