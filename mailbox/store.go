package mailbox

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// ErrLeaseLost is returned by Leases.Extend when another worker holds the mailbox (our lease
// expired and was taken over), and wrapped by a save refused by its lease fence (Mailboxes).
var ErrLeaseLost = errors.New("mailbox: lease lost")

// ErrNotFound is wrapped by a Store's errors for a mailbox that does not exist.
var ErrNotFound = errors.New("mailbox: not found")

// Store is what the machine, the workers and the inbox need from persistence. Every method is
// safe for concurrent use by several workers and several processes sharing one database; an
// error other than the sentinels documented per method means the storage is unavailable and
// the caller retries later. internal/store/postgres implements it on PostgreSQL and
// mailbox/mailboxtest in memory; mailbox/storetest holds the conformance suite both pass.
type Store interface {
	Inbox
	Mailboxes
	Leases
	Questions
	Runs
	Comments
	Reconciliation
	RunQueue
	Controls
}

// Controls is what the machine reads of the operator's controls (spec/operations.md,
// "Controls"); pausing a mailbox or a project is the claims' business (a paused one is not
// leased), draining the workers' (Workers.Drain).
type Controls interface {
	// CancelRequested returns who asked to cancel run runID (an operator's identity), "" when
	// nobody did or there is no such run.
	CancelRequested(ctx context.Context, runID int64) (string, error)
}

// RunQueue hands mailboxes whose state calls for an agent run (RunStates) to the run workers,
// apart from the event workers, so that a long run never holds up the reactions of other
// issues.
type RunQueue interface {
	// LeaseEvents is Leases.Lease for the event workers: a mailbox in one of runStates is due
	// only by its pending events, not by its wake_at (that one is a run worker's).
	LeaseEvents(ctx context.Context, owner string, ttl time.Duration, runStates []string) (*Mailbox, error)
	// LeaseRun claims, for owner and ttl, the mailbox in one of runStates that is due (wake_at
	// come, or pending events) and has waited longest (oldest wake_at, then id), among those
	// whose repository has fewer than perProject mailboxes in runStates under a live lease
	// (perProject <= 0: no limit); nil when none.
	LeaseRun(ctx context.Context, owner string, ttl time.Duration, runStates []string, perProject int) (*Mailbox, error)
	// QueuedRuns returns the ids of the mailboxes in runStates that wait for a run worker (due,
	// lease free or expired), in the order LeaseRun takes them.
	QueuedRuns(ctx context.Context, runStates []string) ([]int64, error)
}

// Reconciliation keeps what comparing mailboxes with their forge, applying each comment once
// and setting poison events aside need.
type Reconciliation interface {
	// ApplyComment claims comment commentID (a forge comment id) of the mailbox for event
	// eventID and reports whether the claim is eventID's: true the first time and for every
	// retry of the same event, false for any other event carrying the same comment (a comment
	// that came both as a delivery and from reconciliation acts once).
	ApplyComment(ctx context.Context, mailboxID, commentID, eventID int64) (mine bool, err error)
	// ReconcileDue returns at most limit working mailboxes (not idle, done or cancelled; not a
	// merge request's own) of the forge named forgeName, never reconciled first, then least
	// recently reconciled.
	ReconcileDue(ctx context.Context, forgeName string, limit int) ([]Mailbox, error)
	// SaveReconciled records what a reconciliation of mailbox id saw, reconciled at the
	// store's clock; the other columns are left as they are.
	SaveReconciled(ctx context.Context, id int64, r Reconciled) error
	// Tracked reports whether ref has a working mailbox.
	Tracked(ctx context.Context, ref forge.IssueRef) (bool, error)
	// KnownRepos returns, sorted in byte order (slices.Sort, whatever the database's
	// collation), the repositories of the forge named forgeName that have at least one
	// mailbox: those whose webhooks reach this Alfred.
	KnownRepos(ctx context.Context, forgeName string) ([]string, error)
	// FailEvents counts one failed attempt to apply each of the events and sets aside those
	// that reached max attempts (marked processed, with the failure time and errText), so the
	// inbox goes on without them. It returns how many were set aside.
	FailEvents(ctx context.Context, eventIDs []int64, errText string, max int) (setAside int, err error)
}

// Inbox is the events table: normalised deliveries waiting to be applied. It is what
// webhook.Inbox needs (Deliver) plus what the machine reads.
type Inbox interface {
	// Deliver stores an event in the inbox of the mailbox it belongs to, creating that
	// mailbox (state idle) when needed, and reports whether it was a duplicate: same forge,
	// delivery id and body hash (a forge's retry). Identical bodies under other delivery ids are
	// new events and are stored (assign, unassign, assign within a second); so is the same id
	// with another body. An empty BodyHash is computed from the event, a zero ReceivedAt set to
	// the store's clock. Events on the bot's merge request (found by
	// its number, else its source branch, else its head commit) go to the issue's mailbox;
	// events on other merge requests to the merge request's own mailbox. The branch counts only
	// when the event names no number or the issue has no merge request yet: a merge request of
	// the same branch name with another number (a fork's) is another merge request. A pipeline that
	// matches no issue's mailbox (by the merge request's number, its branch or its head) returns
	// a *forge.IgnoreError and stores nothing, whatever merge request it names: a merge request
	// that is not Alfred's acts on no pipeline.
	Deliver(ctx context.Context, ev forge.Event) (duplicate bool, err error)
	// PendingEvents returns the mailbox's unprocessed events in arrival order (by id).
	PendingEvents(ctx context.Context, mailboxID int64) ([]StoredEvent, error)
	// MarkProcessed marks one event handled at the store's clock, with a short outcome for
	// debugging. Marking an unknown id is a no-op.
	MarkProcessed(ctx context.Context, eventID int64, outcome string) error
}

// ArrivalInbox is an Inbox that records an inert event processed as it stores it: an event
// for which InertAtRest holds, into a mailbox in a state of RestStates whose events have all
// been applied, is stored with processed_at set and the outcome OutcomeAtRest, and waits for
// no pass. A closed mailbox that retention has purged is not at rest here: its pass saves it,
// which is how retention learns there is something to purge again (Purgeable). The SQL stores are ArrivalInboxes; an Inbox that is not leaves every event to a
// pass, which applies it to the same effect.
type ArrivalInbox interface {
	Inbox
	// Arrive is Deliver, and also reports whether a new event waits for a pass (pending):
	// false when it was recorded processed on arrival.
	Arrive(ctx context.Context, ev forge.Event) (duplicate, pending bool, err error)
}

// Mailboxes reads and writes mailbox rows.
type Mailboxes interface {
	// Get reads a mailbox by id; an error wrapping ErrNotFound when there is none.
	Get(ctx context.Context, id int64) (*Mailbox, error)
	// Save writes the mutable fields of mb (everything but its identity and its lease) and
	// sets updated_at to the store's clock. Every save here and in Runs.SaveApplied is fenced
	// by the lease: it lands only while the mailbox's lease owner is still mb.LeaseOwner, the
	// owner it was read with (nil: read free); otherwise nothing is written and the error
	// wraps ErrLeaseLost (the lease changed hands, or the mailbox is gone).
	Save(ctx context.Context, mb *Mailbox) error
	// SaveProcessed saves mb and marks the events of every group processed with the group's
	// outcome, in one transaction: either the effect of the events is recorded and they are
	// done, or neither. The machine saves a run of events that changed nothing outside the
	// mailbox with one call (spec/reliability.md, "Event processing").
	SaveProcessed(ctx context.Context, mb *Mailbox, done []Processed) error
	// SaveData writes only mb.Data (a failure count outside a pass), fenced like Save.
	SaveData(ctx context.Context, mb *Mailbox) error
}

// Processed is a group of events applied together (folded into one, see foldEvents) and the
// short outcome recorded for each of them.
type Processed struct {
	IDs     []int64
	Outcome string
}

// Leases hand a mailbox to one worker at a time. A lease lasts ttl from the store's clock
// unless extended; once expired anyone may claim the mailbox again (that is the rescue).
type Leases interface {
	// Lease claims, for owner and ttl, the least recently updated mailbox that is due (it has
	// pending events, or its wake_at has come) and whose lease is free or expired, and returns
	// it; nil when none is due. Two concurrent callers never get the same mailbox.
	Lease(ctx context.Context, owner string, ttl time.Duration) (*Mailbox, error)
	// Claim takes the lease of mailbox id for owner and ttl when it is free or expired, due or
	// not, and returns the mailbox; nil when a live lease holds it. A failed pass's backoff (a
	// lease without an owner, Release) holds nothing here: only Lease waits for it.
	Claim(ctx context.Context, id int64, owner string, ttl time.Duration) (*Mailbox, error)
	// Extend renews owner's lease for ttl, only while it is still owner's and unexpired;
	// otherwise ErrLeaseLost.
	Extend(ctx context.Context, id int64, owner string, ttl time.Duration) error
	// Release gives owner's lease back (a no-op when owner does not hold it). With backoff > 0
	// the mailbox is not leased again before backoff has passed.
	Release(ctx context.Context, id int64, owner string, backoff time.Duration) error
	// ExpiredLeases counts held leases that have expired (their holder stopped renewing).
	ExpiredLeases(ctx context.Context) (int, error)
	// UnfinishedMailboxes returns, in id order, the mailboxes a restart must look at: those
	// with a run still in status running or a container the runner records as live.
	UnfinishedMailboxes(ctx context.Context) ([]int64, error)
}

// Questions keeps the question blocks.
type Questions interface {
	// InsertQuestions stores a question block; a question whose (mailbox, round, qid) is
	// already stored is left as it is, so a retried round keeps its first deadline.
	InsertQuestions(ctx context.Context, qs []Question) error
	// Questions returns the questions of one round in insertion order; empty when none.
	Questions(ctx context.Context, mailboxID int64, round int) ([]Question, error)
	// SetQuestionsDeadline moves the deadline of one round's questions to at: a block not
	// posted yet (its post failed) counts its time from the post that shows it.
	SetQuestionsDeadline(ctx context.Context, mailboxID int64, round int, at time.Time) error
	// AnswerQuestion records the answer (an option id), who gave it ("default" when the
	// deadline applied it) and when.
	AnswerQuestion(ctx context.Context, id int64, answer, by string, at time.Time) error
}

// Runs keeps one row per agent run.
type Runs interface {
	// StartRun inserts r in status running, started at the store's clock, and sets r.ID,
	// r.Attempt (1 + the number of earlier runs of the same phase and step in the mailbox),
	// r.Status and r.StartedAt. A store that can tells a rerun (r.Rerun: an earlier run of the
	// same phase and step still recorded running, or succeeded and never applied).
	StartRun(ctx context.Context, r *Run) error
	// FinishRun records the end of r: status, container, exit code, outcome, output, result,
	// finished at the store's clock.
	FinishRun(ctx context.Context, r *Run) error
	// InterruptRuns marks the mailbox's runs still running as interrupted (their worker
	// stopped) and returns them.
	InterruptRuns(ctx context.Context, mailboxID int64) ([]Run, error)
	// Runs returns the mailbox's runs, oldest first.
	Runs(ctx context.Context, mailboxID int64) ([]Run, error)
	// RunningRuns returns the mailbox's runs still in status running, oldest first.
	RunningRuns(ctx context.Context, mailboxID int64) ([]Run, error)
	// FinishRecoveredRun records the end of a run found by recovery (status, outcome, output,
	// result, pushed commit, session hook, Applied). Only a run still running changes; it
	// reports whether r did.
	FinishRecoveredRun(ctx context.Context, r *Run) (bool, error)
	// UnappliedRun returns the latest run of the mailbox's phase and step when it is finished
	// and not yet applied (Applied false), else nil.
	UnappliedRun(ctx context.Context, mailboxID int64, phase, step string) (*Run, error)
	// SaveApplied saves mb and marks run runID applied in one transaction, fenced like
	// Mailboxes.Save: refused, neither written, once the lease changed hands.
	SaveApplied(ctx context.Context, mb *Mailbox, runID int64) error
	// DiscardUnapplied marks every unapplied run of mailbox mb applied except those of phase
	// keepPhase and step keepStep (the run the mailbox's state calls for, whose stored outcome
	// is still to be acted on; "" and "" keep none): the machine moved on without needing them.
	// Fenced like Mailboxes.Save by the lease mb was read under: once the lease changed hands
	// it marks nothing (the new holder's runs are its own) and returns nil; the pass's next
	// save is refused.
	DiscardUnapplied(ctx context.Context, mb *Mailbox, keepPhase, keepStep string) error
}

// Comments records the comments the bot posted, keyed by their marker key (see post).
type Comments interface {
	// PostedComment returns the comment recorded under key in the mailbox, nil when none.
	PostedComment(ctx context.Context, mailboxID int64, key string) (*PostedComment, error)
	// RecordComment stores c, replacing the kind, comment id and body hash of a row with the
	// same mailbox and key.
	RecordComment(ctx context.Context, c PostedComment) error
}

// PostedComment is one row of comments: CommentID 0 records the intent to post before the
// forge has answered.
type PostedComment struct {
	MailboxID int64  `db:"mailbox_id"`
	Key       string `db:"key"`
	Kind      string `db:"kind"`
	CommentID int64  `db:"comment_id"`
	// BodyHash is the hex SHA-256 of the body Alfred last wrote. While a write is on its way
	// it holds every body the comment may have on the forge, space-separated: the intent to
	// post holds the body posted, an edit the body before it and the body written.
	BodyHash string `db:"body_hash"`
}

// Wrote reports whether body is one Alfred wrote in the comment (BodyHash), or may have: an
// intent recorded without a body (an older row) is taken as Alfred's. A reconciliation acts on
// an edit of the bot's comment only when Wrote is false: a human ticked the question block.
func (c PostedComment) Wrote(body string) bool {
	if c.CommentID == 0 && c.BodyHash == "" {
		return true
	}
	return slices.Contains(strings.Fields(c.BodyHash), bodyHash(body))
}

// EventBranch returns the source branch and head commit an event on a merge request or a
// pipeline names, "" for what it does not say; a Store resolves the mailbox of such an event
// by them. A fork's merge request (forge.MergeRequest.FromFork) names none: its branch and
// commits are another repository's, whatever their names.
func EventBranch(ev forge.Event) (branch, sha string) {
	if ev.MergeRequest != nil && ev.MergeRequest.FromFork {
		return "", ""
	}
	if ev.MergeRequest != nil {
		branch, sha = ev.MergeRequest.SourceBranch, ev.MergeRequest.HeadSHA
	}
	if ev.Pipeline != nil {
		branch, sha = cmp.Or(branch, ev.Pipeline.Ref), cmp.Or(sha, ev.Pipeline.SHA)
	}
	return branch, sha
}

// ErrNoMailboxForPipeline is the error a Store's Deliver returns for a pipeline that belongs to
// no mailbox: a *forge.IgnoreError (the receiver answers 200 with the reason).
func ErrNoMailboxForPipeline(ev forge.Event) error {
	return forge.Ignore(ev.Header, "the pipeline belongs to no merge request or branch of Alfred's")
}
