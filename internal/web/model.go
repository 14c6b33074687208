package web

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is wrapped by a Reader's errors for a mailbox or run that does not exist; the
// page answers 404.
var ErrNotFound = errors.New("web: not found")

// Reader is what the pages read. The store implements it (internal/store/postgres); webtest
// has an in-memory one. Every method returns the store's data as is: the pages censor run
// logs themselves (Config.Redact) and compute nothing else.
type Reader interface {
	// Mailboxes lists one page of the mailboxes, newest activity first: at most limit of them,
	// after skipping the first offset in that order.
	Mailboxes(ctx context.Context, offset, limit int) ([]MailboxSummary, error)
	// Mailbox reads one mailbox with its timeline and runs; ErrNotFound when there is none.
	Mailbox(ctx context.Context, id int64) (*MailboxDetail, error)
	// Run reads one run with its stored output; ErrNotFound when there is none.
	Run(ctx context.Context, id int64) (*RunDetail, error)
}

// LiveLogs reads the log of a run's container while it runs. cmd wires the Docker engine; nil
// shows the stored output only.
type LiveLogs interface {
	// RunLog returns the container's combined output so far (stdout and stderr), at most the
	// last maxBytes bytes; ErrNotFound when the container is gone.
	RunLog(ctx context.Context, container string, maxBytes int) (string, error)
}

// Settings answers the settings in force for a project.
type Settings interface {
	// Effective returns the settings that apply to project ("owner/name", a GitLab path), each
	// with where its value came from; project "" gives the global values.
	Effective(project string) ([]Setting, error)
	// Projects lists the projects and organizations that have their own settings, for the
	// page's links.
	Projects() []string
}

// Setting is one effective setting.
type Setting struct {
	// Name is the setting's key in the configuration file ("budget_usd").
	Name string
	// Value is the effective value, formatted; never a secret.
	Value string
	// Source says where the value came from: "default", "global", "org acme", "project acme/shop".
	Source string
}

// MailboxSummary is one row of the mailbox list.
type MailboxSummary struct {
	ID           int64
	Forge        string
	Repo         string
	Number       int64
	MergeRequest bool
	Title        string
	// IssueURL is the issue's (or merge request's) page on the forge; "" when unknown.
	IssueURL string
	// State is the mailbox state ("in_development", "blocked", "done", …).
	State string
	// Phase is the phase running, or the phase due next when queued; "" when none.
	Phase string
	// Queued is true when the mailbox has work waiting for a worker; Running when a run is
	// in progress.
	Queued  bool
	Running bool
	// LastEvent is the type of the last event received, LastEventAt when it came.
	LastEvent   string
	LastEventAt time.Time
	// CostUSD is the cost reported so far by the mailbox's runs; Unrated counts the runs whose
	// adapter reported no cost, so that a 0 is never shown as free.
	CostUSD float64
	Unrated int
	// TokensIn and TokensOut are the mailbox's tokens so far.
	TokensIn, TokensOut int64
	Closed              bool
	// Paused is true when an operator paused the mailbox, PausedBy who; ProjectPaused when its
	// project is paused. No worker takes a paused mailbox until it is resumed; its events are
	// still stored.
	Paused        bool
	PausedBy      string
	ProjectPaused bool
	// ShadowWrites counts the writes Alfred did not make because the project was in shadow
	// mode (MailboxDetail.Shadow lists them); 0 for a project that never was.
	ShadowWrites int
}

// MailboxDetail is one mailbox's page.
type MailboxDetail struct {
	MailboxSummary
	Branch string
	// MergeRequestNumber is the bot's merge request, 0 when none.
	MergeRequestNumber int64
	// Timeline is what happened, oldest first: events received and what the machine decided;
	// of the events, state changes and operator actions only the latest MaxTimelineEvents each.
	Timeline []TimelineEntry
	// TimelineCut is true when older entries than the Timeline holds were left out.
	TimelineCut bool
	// Runs are the mailbox's runs, oldest first.
	Runs []RunSummary
	// Shadow lists, oldest first, what Alfred would have written to the forge while the
	// project was in shadow mode, the latest MaxTimelineEvents; empty for a project that never
	// was.
	Shadow []ShadowPost
	// ShadowCut is true when older shadow writes than Shadow holds were left out.
	ShadowCut bool
}

// MaxTimelineEvents bounds the events, the state changes and the operator actions a mailbox
// page reads, the latest of each: anyone who may comment on an issue can send thousands, and
// each event is decoded to be shown.
const MaxTimelineEvents = 500

// TimelineEntry is one line of a mailbox's timeline.
type TimelineEntry struct {
	At time.Time
	// Kind is "event" (a delivery received), "decision" (what the machine did with it),
	// "state" (the mailbox's state changed, Text "in_ci → in_review": also what no event
	// caused, such as CI found green by a poll, or the merge), "question", "run" or
	// "operator" (a control used on the pages, Text naming who).
	Kind string
	// Text says what happened, e.g. "issues (assigned) by alice" or "started analysis".
	Text string
}

// RunSummary is one run of a mailbox.
type RunSummary struct {
	ID        int64
	MailboxID int64
	Phase     string
	Step      string
	Attempt   int
	// Status is running, succeeded, failed or interrupted.
	Status  string
	Outcome string
	// StartedAt is when the run started; FinishedAt is zero while it runs.
	StartedAt  time.Time
	FinishedAt time.Time
	Container  string
	// Session is the agent session the run used; nil when it used none.
	Session *Session
}

// Session is the llm_sessions record of a run.
type Session struct {
	Adapter string
	Model   string
	// Name is the mailbox's session name; NativeID the CLI's own id.
	Name     string
	NativeID string
	// Resumed is true when the run continued the session; FallbackReason says why a run that
	// should have resumed started fresh.
	Resumed        bool
	FallbackReason string
	TokensIn       int64
	TokensOut      int64
	// CostUSD is the run's share; Rated is false when the adapter reported no cost.
	CostUSD float64
	Rated   bool
}

// RunDetail is one run's page.
type RunDetail struct {
	RunSummary
	Repo   string
	Number int64
	// Output is the stored (redacted, size-capped) output of a finished run.
	Output string
}

// Duration is how long the run took, or has been running at now.
func (r RunSummary) Duration(now time.Time) time.Duration {
	end := r.FinishedAt
	if end.IsZero() {
		end = now
	}
	if r.StartedAt.IsZero() || end.Before(r.StartedAt) {
		return 0
	}
	return end.Sub(r.StartedAt).Round(time.Second)
}

// Cost is the run's cost for its row: "$0.0123" when its adapter reported one; "unrated" when
// it reported none or the run has no session record (sessions off, a merge request not the
// bot's, an adapter without sessions); "pending" while it runs; "none (no agent)" for a
// finished run that started no container (the target branch merged without a conflict).
func (r RunSummary) Cost() string {
	switch {
	case r.Session != nil && r.Session.Rated:
		return Cost(r.Session.CostUSD, 0)
	case r.Running():
		return "pending"
	case r.Session == nil && r.Container == "":
		return "none (no agent)"
	}
	return "unrated"
}

// Running reports whether the run has not finished.
func (r RunSummary) Running() bool { return r.FinishedAt.IsZero() && r.Status == "running" }
