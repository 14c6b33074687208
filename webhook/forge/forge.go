// Package forge is the leaf vocabulary shared by the webhook edge, the mailbox and the runner:
// forge kinds, references to issues and merge requests, normalised inbound events and the
// outbound Forge interface that the GitLab and Forgejo adapters implement.
//
// It imports nothing from this module. Forgejo calls a merge request a "pull request"; in code
// the one term is "merge request", and the Forgejo adapter translates.
package forge

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Kind is the type of a forge server.
type Kind string

const (
	// KindGitLab is a GitLab server (gitlab.com or self-managed).
	KindGitLab Kind = "gitlab"
	// KindForgejo is a Forgejo server; a Gitea server works as Forgejo.
	KindForgejo Kind = "forgejo"
)

// Valid reports whether k is a kind Alfred supports.
func (k Kind) Valid() bool { return k == KindGitLab || k == KindForgejo }

// IssueRef names an issue or a merge request on a configured forge.
//
// Forge is the configured forge name (the {forge} of POST /webhooks/{forge}), Repo is the
// project path "owner/name" (GitLab: the full path with namespaces, "group/sub/name"), Number is
// the GitLab iid or the Forgejo index. Issues and merge requests share the number space on
// Forgejo but not on GitLab, so MergeRequest tells them apart.
type IssueRef struct {
	Forge        string `json:"forge"`
	Repo         string `json:"repo"`
	Number       int64  `json:"number"`
	MergeRequest bool   `json:"merge_request,omitempty"`
}

// String renders the reference as "forge:owner/name#12" (or "!12" for a merge request).
func (r IssueRef) String() string {
	sep := "#"
	if r.MergeRequest {
		sep = "!"
	}
	return fmt.Sprintf("%s:%s%s%d", r.Forge, r.Repo, sep, r.Number)
}

// User is a forge account as seen in an event or an API answer.
type User struct {
	ID    int64  `json:"id,omitempty"`
	Login string `json:"login"`
	// Bot is true when the forge marks the account as a bot (GitLab bot users, Forgejo/Gitea
	// "bot" user type) or when it is one of the configured other bots.
	Bot bool `json:"bot,omitempty"`
}

// EventType is the normalised kind of an inbound event.
type EventType string

// The event vocabulary. Every delivery Alfred acts on becomes exactly one of these.
const (
	// EventIssueOpened: an issue was opened (it may already carry assignees and labels).
	EventIssueOpened EventType = "issue_opened"
	// EventIssueEdited: title or description changed.
	EventIssueEdited EventType = "issue_edited"
	// EventIssueClosed: the issue was closed, by hand or by a merge (see Event.ClosedByCommit).
	EventIssueClosed EventType = "issue_closed"
	// EventIssueReopened: the issue was reopened.
	EventIssueReopened EventType = "issue_reopened"
	// EventAssignees: the assignee list changed; Event.Assignees holds the list after the change.
	EventAssignees EventType = "assignees"
	// EventLabels: the label list changed; Event.Labels holds the list after the change.
	EventLabels EventType = "labels"
	// EventComment: a comment was created.
	EventComment EventType = "comment"
	// EventCommentEdited: a comment was edited (for example ticks in a question block).
	EventCommentEdited EventType = "comment_edited"
	// EventMergeRequestOpened: a merge request was opened or reopened.
	EventMergeRequestOpened EventType = "merge_request_opened"
	// EventMergeRequestUpdated: new commits were pushed to a merge request.
	EventMergeRequestUpdated EventType = "merge_request_updated"
	// EventMergeRequestClosed: a merge request was closed without merge.
	EventMergeRequestClosed EventType = "merge_request_closed"
	// EventMergeRequestMerged: a merge request was merged.
	EventMergeRequestMerged EventType = "merge_request_merged"
	// EventReview: a review was submitted (approved, changes requested or comment).
	EventReview EventType = "review"
	// EventReviewRequested: someone was asked to review a merge request; Event.ReviewRequested
	// names the accounts asked (Forgejo/Gitea review_requested, GitLab changes.reviewers).
	EventReviewRequested EventType = "review_requested"
	// EventMergeStatus: the forge reports the merge request's mergeability changed without new
	// commits (GitLab detailed_merge_status in a merge request update); see MergeRequest.MergeStatus.
	EventMergeStatus EventType = "merge_status"
	// EventPipeline: a CI pipeline (GitLab) or commit status (Forgejo) changed.
	EventPipeline EventType = "pipeline"
	// EventTick is not a delivery: the mailbox worker wakes a mailbox for a deadline.
	EventTick EventType = "tick"
)

// CIState is the normalised state of a pipeline or of a commit's combined status.
type CIState string

// CI states. GitLab "failed" and Forgejo "failure"/"error" are CIFailed.
const (
	CINone    CIState = "none"    // no pipeline or status exists for the commit
	CIPending CIState = "pending" // created, waiting, running
	CISuccess CIState = "success"
	CIFailed  CIState = "failed"
	CISkipped CIState = "skipped" // GitLab "skipped"/"manual"; not a failure, not a success
	// CICanceled is a pipeline stopped before it ended (GitLab "canceled" and "canceling": by a
	// person, or by GitLab's auto-cancel of redundant pipelines): nothing failed, nothing
	// passed. Forgejo's commit statuses have no such state (success, pending, failure, error,
	// warning): a cancelled Forgejo Actions run reports a failure ("Has been cancelled").
	CICanceled CIState = "canceled"
)

// MergeRequest is the part of a merge request (Forgejo: pull request) that Alfred uses.
type MergeRequest struct {
	Number       int64  `json:"number"`
	Title        string `json:"title,omitempty"`
	Body         string `json:"body,omitempty"`
	SourceBranch string `json:"source_branch"`
	TargetBranch string `json:"target_branch,omitempty"`
	HeadSHA      string `json:"head_sha,omitempty"`
	State        string `json:"state,omitempty"` // "open", "closed" or "merged"
	Merged       bool   `json:"merged,omitempty"`
	WebURL       string `json:"web_url,omitempty"`
	Author       User   `json:"author"`
	// MergeStatus says whether the source branch merges into the target without conflict;
	// MergeStatusUnknown when the payload or answer does not say.
	MergeStatus MergeStatus `json:"merge_status,omitempty"`
	// UpdatedAt is the forge's last-change time of the merge request (zero when a webhook
	// payload does not carry it); reconciliation compares it to skip unchanged ones.
	UpdatedAt time.Time `json:"updated_at,omitempty"`
	// FromFork is set when the source branch is in another repository than the target (a
	// fork's merge request), as the payload says (Forgejo head.repo_id against base.repo_id,
	// GitLab source_project_id against target_project_id); false when it does not say. The
	// bot's own merge requests never are: a fork's branch named like the bot's is another's.
	FromFork bool `json:"from_fork,omitempty"`
}

// Comment is an issue or merge-request comment (GitLab: note).
type Comment struct {
	ID        int64     `json:"id"`
	Body      string    `json:"body"`
	Author    User      `json:"author"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at,omitempty"`
	// Thread is the thread the comment belongs to, "" when the forge has none: GitLab the
	// discussion id (Note Hook discussion_id).
	Thread string `json:"thread,omitempty"`
	// Position is where in the diff the comment sits (GitLab DiffNote position), nil for a
	// general comment.
	Position *Position `json:"position,omitempty"`
}

// Pipeline describes a CI run for Event.Pipeline and Forge.CIStatus.
type Pipeline struct {
	ID     int64   `json:"id,omitempty"`
	State  CIState `json:"state"`
	SHA    string  `json:"sha,omitempty"`
	Ref    string  `json:"ref,omitempty"`
	WebURL string  `json:"web_url,omitempty"`
	// MergeRequest is the merge request number the pipeline ran for, 0 when unknown.
	MergeRequest int64 `json:"merge_request,omitempty"`
	// OfMergeRequest is true for a GitLab merge request pipeline (its source
	// merge_request_event): detached, merged results or merge train. Its hook names the
	// source branch as its ref and, for merged results, a merge commit of the head as its SHA
	// (GitLab's Gitlab::DataBuilder::Pipeline sends ref: source_ref, sha: the pipeline's sha),
	// so neither says which head it ran for.
	OfMergeRequest bool `json:"of_merge_request,omitempty"`
	// FailedJobs names the failed jobs (GitLab jobs, Forgejo status contexts), with a log excerpt
	// when the forge gives one. Filled by Forge.CIStatus, not by webhook parsing.
	FailedJobs []FailedJob `json:"failed_jobs,omitempty"`
}

// mergeRefPipeline matches the refs of GitLab's merged-results and merge-train pipelines.
var mergeRefPipeline = regexp.MustCompile(`^refs/merge-requests/\d+/(merge|train)$`)

// MergedResults reports whether p is a GitLab merged-results or merge-train pipeline: it runs
// on refs/merge-requests/<iid>/merge (or /train), a merge commit of the merge request's head
// into its target branch, so its SHA is that merge commit's and not the head's
// (https://docs.gitlab.com/ci/pipelines/merged_results_pipelines/). Forgejo has none.
func (p Pipeline) MergedResults() bool { return mergeRefPipeline.MatchString(p.Ref) }

// ForMergeRequest reports whether p ran for merge request number without saying for which of
// its heads: a merged-results pipeline (MergedResults) or a merge request pipeline
// (OfMergeRequest) of that merge request.
func (p Pipeline) ForMergeRequest(number int64) bool {
	return number != 0 && p.MergeRequest == number && (p.MergedResults() || p.OfMergeRequest)
}

// FailedJob is one failed CI job or failed commit status.
type FailedJob struct {
	Name   string `json:"name"`
	WebURL string `json:"web_url,omitempty"`
	// Log is the tail of the job's log (GitLab job trace) or the status description (Forgejo),
	// at most a few KiB.
	Log string `json:"log,omitempty"`
}

// Review is a submitted merge-request review.
type Review struct {
	State string `json:"state"` // "approved", "changes_requested", "commented", "unapproved"
	Body  string `json:"body,omitempty"`
}

// Event is one normalised inbound delivery. Parsers fill what the payload carries; fields that
// a payload does not carry stay zero and their *Known flag false.
type Event struct {
	// Forge is the configured forge name the delivery came to; Kind its type.
	Forge string `json:"forge"`
	Kind  Kind   `json:"kind"`
	// DeliveryID identifies the delivery: GitLab Idempotency-Key, else X-Gitlab-Event-UUID;
	// Forgejo/Gitea X-Forgejo-Delivery / X-Gitea-Delivery.
	DeliveryID string `json:"delivery_id"`
	// BodyHash is the hex SHA-256 of the raw body. A delivery is a duplicate only when both
	// DeliveryID and BodyHash were seen: two identical bodies under two ids are two events
	// (Forgejo sends byte-identical bodies for assign, unassign, assign within a second).
	BodyHash string `json:"body_hash"`
	// Header is the raw event name (X-Gitlab-Event or X-Forgejo-Event-Type) and Action the
	// payload's action, kept for logs and debugging.
	Header string `json:"header"`
	Action string `json:"action,omitempty"`

	Type EventType `json:"type"`
	// Target is the issue or merge request the event is about.
	Target IssueRef `json:"target"`
	// Sender is the account that caused the event.
	Sender User `json:"sender"`
	// Author is the author of the issue or merge request.
	Author User   `json:"author"`
	Title  string `json:"title,omitempty"`
	Body   string `json:"body,omitempty"`
	State  string `json:"state,omitempty"` // "open" or "closed"

	// Labels is the full label list after the event when LabelsKnown; PreviousLabels the list
	// before it when the forge says (GitLab changes.labels), else nil: an empty list (none
	// before) is not nil, and keeps so through the store (omitzero).
	LabelsKnown    bool     `json:"labels_known,omitempty"`
	Labels         []string `json:"labels,omitempty"`
	PreviousLabels []string `json:"previous_labels,omitzero"`
	// Assignees likewise, as logins. A labels event may carry an assignee change of the same
	// update too (GitLab): PreviousAssignees not nil and different from Assignees.
	AssigneesKnown    bool     `json:"assignees_known,omitempty"`
	Assignees         []string `json:"assignees,omitempty"`
	PreviousAssignees []string `json:"previous_assignees,omitzero"`

	Comment      *Comment      `json:"comment,omitempty"`
	MergeRequest *MergeRequest `json:"merge_request,omitempty"`
	Pipeline     *Pipeline     `json:"pipeline,omitempty"`
	Review       *Review       `json:"review,omitempty"`
	// ReviewRequested lists the logins newly asked to review: of EventReviewRequested, and
	// on GitLab of a merge request opened with reviewers (EventMergeRequestOpened) or a change
	// of its labels or assignees that also added reviewers (one delivery for all of it).
	ReviewRequested []string `json:"review_requested,omitempty"`
	// ClosedByCommit is the merge commit that closed an issue (Forgejo commit_id), "" for a
	// manual close.
	ClosedByCommit string `json:"closed_by_commit,omitempty"`
	// OccurredAt is when the forge says the event happened; ReceivedAt when Alfred got it.
	OccurredAt time.Time `json:"occurred_at,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
}

// IgnoreError is returned by a parser for a delivery Alfred does not act on. The HTTP edge
// answers it with 200 and the Reason, never with 4xx/5xx (GitLab disables hooks that fail).
type IgnoreError struct {
	Header string // raw event name
	Reason string // human-readable, e.g. "push events are not used"
}

func (e *IgnoreError) Error() string { return "ignored " + e.Header + " event: " + e.Reason }

// Ignore builds an *IgnoreError.
func Ignore(header, format string, args ...any) error {
	return &IgnoreError{Header: header, Reason: fmt.Sprintf(format, args...)}
}

// Sentinel errors returned by Forge implementations, matched with errors.Is.
var (
	// ErrNotFound: the issue, merge request, comment or project does not exist (HTTP 404).
	ErrNotFound = errors.New("forge: not found")
	// ErrForbidden: the bot's token may not do this (HTTP 401/403).
	ErrForbidden = errors.New("forge: forbidden")
	// ErrConflict: the forge refused the change as invalid or conflicting (HTTP 409/422).
	ErrConflict = errors.New("forge: conflict")
	// ErrRefused: the forge refused the request for another reason of the client's (any other
	// HTTP 4xx but 408 and 429, which are retried: 400, 405, 413 a body too large…). Sending the
	// same request again cannot succeed.
	ErrRefused = errors.New("forge: refused")
	// ErrUnavailable: the forge did not answer, or answered 408, 429 or 5xx, after the client's
	// retries. It is worth trying again later; nothing about the request itself is wrong.
	ErrUnavailable = errors.New("forge: unavailable")
)

// Issue is what Forge.Issue returns.
type Issue struct {
	Ref       IssueRef `json:"ref"`
	Title     string   `json:"title"`
	Body      string   `json:"body"`
	State     string   `json:"state"` // "open" or "closed"
	Author    User     `json:"author"`
	Labels    []string `json:"labels"`
	Assignees []string `json:"assignees"`
	WebURL    string   `json:"web_url,omitempty"`
	// UpdatedAt is the forge's last-change time of the issue: GitLab updated_at, Forgejo
	// "updated". Both forges move it on an edit, a label or assignee change, a state change
	// and a new comment, so an unchanged UpdatedAt means nothing a mailbox reads changed on
	// the issue itself (a merge request has its own).
	UpdatedAt time.Time `json:"updated_at,omitempty"`
}

// ActivityKind is the kind of change an Activity records.
type ActivityKind string

// The changes Forge.Activity reports.
const (
	ActivityLabelAdded   ActivityKind = "label_added"   // Activity.Label was added
	ActivityLabelRemoved ActivityKind = "label_removed" // Activity.Label was removed
	ActivityAssigned     ActivityKind = "assigned"      // Activity.Login was assigned
	ActivityUnassigned   ActivityKind = "unassigned"    // Activity.Login was unassigned
	ActivityClosed       ActivityKind = "closed"        // the issue was closed
	ActivityReopened     ActivityKind = "reopened"      // the issue was reopened
)

// Activity is one change of an issue with the account that made it, as the forge's history
// records it (not a webhook).
type Activity struct {
	Kind  ActivityKind `json:"kind"`
	Actor User         `json:"actor"`
	// Label is the label name for the label kinds, Login the assignee for the assignee kinds.
	Label string    `json:"label,omitempty"`
	Login string    `json:"login,omitempty"`
	At    time.Time `json:"at"`
}

// Repository is what Forge.Repository returns.
type Repository struct {
	Path          string `json:"path"` // owner/name
	DefaultBranch string `json:"default_branch"`
	// CloneURL is the HTTP(S) clone URL without credentials. Alfred authenticates git with an
	// Authorization header passed through the environment, never in the URL.
	CloneURL string `json:"clone_url"`
}

// NewMergeRequest is the input of Forge.CreateMergeRequest.
type NewMergeRequest struct {
	SourceBranch string
	TargetBranch string
	Title        string
	Body         string
}

// Forge is the outbound API of one configured forge. Implementations retry rate limits
// (HTTP 429) with backoff, and 5xx for reads and state-setting writes (never a POST or a merge,
// which the forge may have made before the answer was lost: the caller finds it by its marker
// before writing again), and map 404 to ErrNotFound, 401/403 to ErrForbidden,
// 409/422 to ErrConflict and a last 429/5xx or no answer to ErrUnavailable. Every method is safe for concurrent use.
type Forge interface {
	// Kind returns the forge type.
	Kind() Kind
	// BotUser returns the account the token belongs to.
	BotUser(ctx context.Context) (User, error)
	// Role returns login's role in the repository (see Role for the calls and fields of each
	// forge). An unknown login is RoleNone with a nil error; a missing repository ErrNotFound.
	// The bot's token needs admin on the repository for Forgejo/Gitea to answer about others.
	Role(ctx context.Context, repo, login string) (Role, error)
	// Repository returns the repository's default branch and clone URL.
	Repository(ctx context.Context, repo string) (*Repository, error)

	// Issue reads an issue. ErrNotFound when it was deleted.
	Issue(ctx context.Context, ref IssueRef) (*Issue, error)
	// SetIssueBody replaces the issue description.
	SetIssueBody(ctx context.Context, ref IssueRef, body string) error
	// Comments lists all comments of an issue or merge request, oldest first, following every
	// page.
	Comments(ctx context.Context, ref IssueRef) ([]Comment, error)
	// Comment posts a comment and returns its id.
	Comment(ctx context.Context, ref IssueRef, body string) (int64, error)
	// EditComment replaces a comment's body.
	EditComment(ctx context.Context, ref IssueRef, id int64, body string) error
	// SetLabels adds and removes labels by name, creating missing project labels first. Adding a
	// present label or removing an absent one is not an error.
	SetLabels(ctx context.Context, ref IssueRef, add, remove []string) error
	// EnsureLabels creates the repository labels among names that do not exist yet (GitLab: project
	// labels; Forgejo: repository labels, an organisation label of the same name counts as existing).
	// Existing labels are left as they are. Scoped names like "status::done" are created as given.
	EnsureLabels(ctx context.Context, repo string, names []string) error
	// SetAssignees adds and removes assignees by login.
	SetAssignees(ctx context.Context, ref IssueRef, add, remove []string) error

	// CreateMergeRequest opens a merge request; if one is already open for the source branch it
	// returns that one instead.
	CreateMergeRequest(ctx context.Context, repo string, mr NewMergeRequest) (*MergeRequest, error)
	// MergeRequest reads a merge request by number.
	MergeRequest(ctx context.Context, repo string, number int64) (*MergeRequest, error)
	// AssignedIssues lists the open issues (not merge requests) assigned to the bot account on
	// the whole forge, updated at or after since (zero: all), most recently updated first, at
	// most limit of them (limit <= 0: all), following pages. GitLab: GET /issues with
	// assignee_username, state=opened, scope=all, updated_after; Forgejo/Gitea:
	// GET /repos/issues/search with assigned=true, state=open, type=issues, since. Ref.Forge is
	// left empty: the caller knows the configured forge name.
	AssignedIssues(ctx context.Context, since time.Time, limit int) ([]Issue, error)
	// CommentsSince lists the comments of an issue or merge request created or edited at or
	// after since, oldest first, following pages (zero since: all, like Comments). Forgejo
	// filters with ?since; GitLab has no filter and is read newest-edited first until the
	// notes are older than since.
	CommentsSince(ctx context.Context, ref IssueRef, since time.Time) ([]Comment, error)

	// Activity lists the label, assignee and open/closed changes of an issue made at or after
	// since (zero: all), oldest first, each with the account that made it, following pages.
	// Forgejo: GET …/issues/{index}/timeline?since= (types "label", "assignees", "close",
	// "reopen"); GitLab: resource_label_events, resource_state_events and the system notes
	// "assigned to @…" / "unassigned @…". Reconciliation uses it to name who made a change it
	// missed, so that permissions are checked as for a delivery.
	Activity(ctx context.Context, ref IssueRef, since time.Time) ([]Activity, error)

	// Hooks lists the repository's webhooks, following every page (Forgejo/Gitea:
	// GET /repos/{owner}/{repo}/hooks; GitLab: GET /projects/:id/hooks). Both forges let only
	// repository administrators read them (Forgejo admin, GitLab Maintainer): for another
	// account it returns an error wrapping ErrForbidden (Forgejo answers some non-admins 404:
	// ErrNotFound). Reconciliation reads them to tell whether a repository that never sent a
	// delivery sends its webhooks to this Alfred (spec/reliability.md).
	Hooks(ctx context.Context, repo string) ([]Hook, error)

	// CIStatus returns the state of CI on a commit: GitLab's latest pipeline for the sha,
	// Forgejo's combined commit status. CINone when nothing ran, and for an empty sha (no
	// commit: GitLab would answer the project's latest pipeline of any branch). For CIFailed it
	// fills FailedJobs.
	CIStatus(ctx context.Context, repo, sha string) (*Pipeline, error)
}

// Sentinel errors returned by webhook sources (the inbound edge), matched with errors.Is. The
// HTTP receiver maps them to status codes; messages wrapping them never contain a received token
// or signature.
var (
	// ErrSignature: the delivery's token or signature is missing, malformed or matches none of
	// the configured secrets (GitLab X-Gitlab-Token, Forgejo/Gitea X-Forgejo-Signature /
	// X-Gitea-Signature). The receiver answers 401.
	ErrSignature = errors.New("forge: missing or invalid webhook signature")
	// ErrBadPayload: the delivery is not a webhook Alfred can read (missing event header, body
	// that is not JSON or does not have the shape of its event). The receiver answers 400.
	ErrBadPayload = errors.New("forge: bad webhook payload")
)
