// Package mailbox makes Alfred's decisions. Every issue (and every merge request that is not
// the bot's own) has a mailbox: an inbox of normalised events, a state in the lifecycle, the
// questions asked, the runs made and the comments posted. A worker (worker.go) leases one
// mailbox at a time and makes one pass over it (Machine.Advance): it folds the pending events
// into the state machine, fires due timers, starts the run the state calls for through a
// JobRunner, and writes the visible state back as scoped labels.
//
// What a state means is one table, lifecycle in states.go: for each State its status label
// (a key into Labels), the run it starts (phase and step, or none), the timer that wakes it
// (question deadline, CI poll, a due run, or none), the inputs it accepts (answers, a type
// label, the plan validation, retry, CI) and, for each trigger, the state it leads to; plus
// the transitions every working state accepts. The machine reads the table; the files hold
// what is procedural:
//
//   - machine.go: the pass, timers and wake-ups, state changes and their labels;
//   - events.go: folding and dispatching events (assignees, labels, comments, merge requests);
//     effects.go counts what applying an event did outside the mailbox, so that events that
//     did nothing share a commit;
//   - asking.go: starting, asking a question block, answers, the deadline;
//     questions.go renders the block and parses replies and ticks;
//   - runs.go: preparing a run, the one Job builder (jobFor), applying results; analysis.go
//     the functional analysis; recovery.go runs a restart finds again;
//   - rebuild.go: a mailbox the store lost, rebuilt from what Alfred left on the forge (its
//     status label, marked comments, question block, description section, plan, merge request);
//   - ci.go: CI results and ci_fix; reviewloop.go the review loop and automerge.go the opt-in
//     merge of the bot's merge request; comments.go: the marker-keyed post-or-edit protocol
//     (markers.go); closing.go: done, cancel, block, retry.
//
// Persistence is the Store interface (store.go), implemented by internal/store/postgres and, in
// memory, by mailbox/mailboxtest; mailbox/storetest is the conformance suite both pass. The
// lifecycle is specified in spec/lifecycle.md, and spec_test.go fails when the document and
// the table differ.
package mailbox

import (
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// StringList is a []string stored as a JSON array in a TEXT column (portable to SQLite).
type StringList []string

// Value implements driver.Valuer.
func (l StringList) Value() (driver.Value, error) {
	if l == nil {
		l = StringList{}
	}
	b, err := json.Marshal([]string(l))
	return string(b), err
}

// Scan implements sql.Scanner.
func (l *StringList) Scan(src any) error { return scanJSON(src, (*[]string)(l)) }

func scanJSON(src any, dst any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	case nil:
		return nil
	default:
		return fmt.Errorf("scan JSON column: unexpected %T", src)
	}
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, dst)
}

// Data is the part of a mailbox's memory that has no column of its own, stored as a JSON
// document in mailboxes.data.
type Data struct {
	Acknowledged bool `json:"acknowledged,omitempty"`
	// Round counts the question blocks asked (type question is round 0; analysis rounds 1+).
	Round int `json:"round,omitempty"`
	// QuestionIntro is the introduction of the current round's question block, kept to render
	// the block again once answered.
	QuestionIntro string `json:"question_intro,omitempty"`
	// AnalysisRound is the round of the functional analysis questions, 0 when none were asked.
	AnalysisRound int `json:"analysis_round,omitempty"`
	// Analysis is the functional analysis result; Decisions the answers (qid → option label),
	// FreeText free-form human replies handed to the agent.
	Analysis  *phase.Result     `json:"analysis,omitempty"`
	Decisions map[string]string `json:"decisions,omitempty"`
	FreeText  string            `json:"free_text,omitempty"`
	// Ticks are the choices ticked so far in a block of several questions (qid → option id),
	// TicksBy who ticked each (qid → login), not yet an answer: the round closes with them at
	// TicksDue (TickQuiet after the last tick edit), at the deadline, or at once when every
	// question was ticked; zero TicksDue when none wait.
	Ticks   map[string]string `json:"ticks,omitempty"`
	TicksBy map[string]string `json:"ticks_by,omitempty"`
	// TicksSeen are the block's ticks as the forge last showed them, whoever made them (an
	// edit the gate refused too): an edit's own changes are what it changed from them, so a
	// refused tick is not taken with the next accepted click.
	TicksSeen map[string]string `json:"ticks_seen,omitempty"`
	TicksDue  time.Time         `json:"ticks_due,omitzero"`
	// Plan is the technical analysis; ValidatedBy the login that validated it.
	Plan        string `json:"plan,omitempty"`
	ValidatedBy string `json:"validated_by,omitempty"`
	// CIAttempts counts ci_fix runs; CIWaitUntil is when "no pipeline" is declared.
	CIAttempts  int       `json:"ci_attempts,omitempty"`
	CIWaitUntil time.Time `json:"ci_wait_until,omitempty"`
	// HeadSetAt is when the machine last set the merge request's head from a run's push
	// (setHead): an event received before it that names another head is about an older commit
	// and does not move the head back (spec/reliability.md, "Exactly once").
	HeadSetAt time.Time `json:"head_set_at,omitempty"`
	// ReplacedHeads are the heads Alfred's pushes replaced (at most maxReplacedHeads, newest
	// last): an event naming one is about an older commit, however late it comes.
	ReplacedHeads []string `json:"replaced_heads,omitempty"`
	CILog         string   `json:"ci_log,omitempty"`
	// Blocked is the reason of the last block; BlockedFrom the state to retry.
	Blocked     string `json:"blocked,omitempty"`
	BlockedFrom State  `json:"blocked_from,omitempty"`
	// AuthorAssignedByHuman is set while a question round waits whose author was already
	// assigned when Alfred asked, by themselves or a maintainer (the issue's assignee history
	// does not show the bot as the last to assign them): the answers then leave the author
	// assigned instead of handing the turn back.
	AuthorAssignedByHuman bool `json:"author_assigned_by_human,omitempty"`
	// Failures counts failed runs in a row of the current phase.
	Failures int `json:"failures,omitempty"`
	// FailedPasses counts the passes (Machine.Advance) in a row that failed for a reason
	// outside the issue (forge, database, Docker or git unavailable); a successful pass
	// resets it.
	FailedPasses int `json:"failed_passes,omitempty"`
	// StuckReports counts the "I cannot go on" comments posted, for their keys.
	StuckReports int `json:"stuck_reports,omitempty"`
	// Blocks counts the blocks of this lifecycle; it keys each block comment.
	Blocks int `json:"blocks,omitempty"`

	// ReviewDue is when the review comments gathered so far go to a review_fix run: the end of
	// the quiet time after the last review event; zero when none wait.
	ReviewDue time.Time `json:"review_due,omitempty"`
	// ReviewAttempts counts the review_fix runs of the merge request.
	ReviewAttempts int `json:"review_attempts,omitempty"`
	// Handled lists the review comments a review_fix run gave an outcome (or that were
	// refused), so none is handed to a run twice.
	Handled []int64 `json:"handled,omitempty"`
	// ReviewComments are the comments the current review_fix run addresses, kept to answer each
	// in its thread.
	ReviewComments []forge.ReviewComment `json:"review_comments,omitempty"`
	// MergeCheckAt is when the merge status is read next; ConflictReads counts the reads in a
	// row that said conflict (Forgejo also says so while it checks: two are needed there).
	MergeCheckAt  time.Time `json:"merge_check_at,omitempty"`
	ConflictReads int       `json:"conflict_reads,omitempty"`
	// MergeCheckAfter, when set, pauses the merge status reads: the last conflict_resolution
	// found the branch up to date, so a forge still saying "not mergeable" means something else
	// (a Forgejo WIP title, say).
	MergeCheckAfter time.Time `json:"merge_check_after,omitempty"`
	// UntilGreen is on while ai::retry_until_green is; UntilGreenRuns counts the ci_fix and
	// review_fix runs under it.
	UntilGreen     bool `json:"until_green,omitempty"`
	UntilGreenRuns int  `json:"until_green_runs,omitempty"`
	// ReviewHead is the head a review run of a merge request not the bot's reads; ReviewedHead
	// the head the bot's last posted review covered (the next review covers what changed since).
	ReviewHead   string `json:"review_head,omitempty"`
	ReviewedHead string `json:"reviewed_head,omitempty"`
	// InterruptedBefore is the last run counted by a block for interrupted runs
	// (InterruptedRunBudget): the runs up to it no longer count against the budget.
	InterruptedBefore int64 `json:"interrupted_before,omitempty"`
	// RetryOnce is set by the ai::retry_once label: one more run may start past the budget.
	RetryOnce bool `json:"retry_once,omitempty"`
	// FirstRunAt is when the mailbox's first run started, for the status comment.
	FirstRunAt time.Time `json:"first_run_at,omitempty"`
	// AutoMergeRefused is the head the forge refused to auto-merge: Alfred does not try that
	// head again until an event on the merge request or the auto-merge label added again.
	AutoMergeRefused string `json:"auto_merge_refused,omitempty"`
	// AutoMergeBy is the writer whose ai::auto_merge label is in force ("" when unknown: the
	// label history tells, autoMergeEnabler); the merge gate checks they still may steer.
	AutoMergeBy string `json:"auto_merge_by,omitempty"`
	// IgnoredLabels are the state labels on the issue the gate did not take (added by someone
	// without the state_label role, mailbox/gate), and the steering and state labels another
	// bot added, which act on nothing: the assignment does not take them as the type either,
	// and an ai::auto_merge among them enables auto-merge for nobody (the merge gate takes it
	// off as a non-writer's). A label leaves the list when it is
	// removed or a writer adds it again.
	IgnoredLabels []string `json:"ignored_labels,omitempty"`
	// CancelledAttempt is the attempt of the state's run an operator cancelled while the
	// process running it was down, found by start-up recovery (which says nothing on the
	// forge): the next pass blocks the mailbox as a live run's cancel does. 0: none.
	CancelledAttempt int `json:"cancelled_attempt,omitempty"`
	// RefusedEdits are the comment edits the gate did not take when their delivery named who
	// made them (the comment id and a hash of the edited body; the latest maxRefusedEdits): the
	// same edit found by reconciliation, which can only attribute it to the comment's author
	// (or, for Alfred's question block, the issue's), is not taken in their name.
	RefusedEdits []RefusedEdit `json:"refused_edits,omitempty"`
	// AutoMergeWaits is what auto-merge last said it waits for, so that it is said once per
	// change.
	AutoMergeWaits string `json:"auto_merge_waits,omitempty"`
	// ShadowParked is the state whose run shadow mode did not start (a phase that pushes),
	// recorded once as a ShadowRun write; "" when none.
	ShadowParked string `json:"shadow_parked,omitempty"`
	// SelfReview is what the self-review of the bot's merge request found and did
	// (selfreview.go); nil when no self-review was asked for.
	SelfReview *SelfReview `json:"self_review,omitempty"`
	// ShadowMerged is the head shadow mode recorded an auto-merge of (a ShadowMerge write)
	// instead of merging: the issue stays in review, and that head is not recorded again.
	ShadowMerged string `json:"shadow_merged,omitempty"`
}

// Value implements driver.Valuer.
func (d Data) Value() (driver.Value, error) {
	b, err := json.Marshal(d)
	return string(b), err
}

// Scan implements sql.Scanner.
func (d *Data) Scan(src any) error { return scanJSON(src, d) }

// Mailbox is one row of mailboxes.
type Mailbox struct {
	ID           int64      `db:"id"`
	Forge        string     `db:"forge"`
	Repo         string     `db:"repo"`
	Number       int64      `db:"number"`
	MergeRequest bool       `db:"merge_request"`
	State        State      `db:"state"`
	Type         string     `db:"issue_type"` // task, bug, analysis, question; "" until known
	Author       string     `db:"author"`
	Title        string     `db:"title"`
	Labels       StringList `db:"labels"`
	Assignees    StringList `db:"assignees"`
	Branch       string     `db:"branch"`
	MRNumber     int64      `db:"mr_number"`
	HeadSHA      string     `db:"head_sha"`
	Data         Data       `db:"data"`
	WakeAt       *time.Time `db:"wake_at"`
	LeaseOwner   *string    `db:"lease_owner"`
	LeaseExpires *time.Time `db:"lease_expires_at"`
	ClosedAt     *time.Time `db:"closed_at"`
	CreatedAt    time.Time  `db:"created_at"`
	UpdatedAt    time.Time  `db:"updated_at"`
	// LeaseAttempts counts the claims of the mailbox since a pass last ended with its lease
	// released (Leases.Release resets it): a pass that kills the process leaves it counted.
	// Only the Leases methods write it.
	LeaseAttempts int `db:"lease_attempts"`
	// Reconciled is what the last comparison with the forge saw; only
	// Reconciliation.SaveReconciled writes it.
	Reconciled
}

// Reconciled is what a mailbox remembers of its last reconciliation: when it ran, the issue's
// and the merge request's updated times then, and the time from which comments are still to
// be read. Nil times: never.
type Reconciled struct {
	ReconciledAt   *time.Time `db:"reconciled_at"`
	IssueUpdatedAt *time.Time `db:"issue_updated_at"`
	MRUpdatedAt    *time.Time `db:"mr_updated_at"`
	CommentsSince  *time.Time `db:"comments_since"`
}

// Ref returns the mailbox's issue (or merge request) reference.
func (m *Mailbox) Ref() forge.IssueRef {
	return forge.IssueRef{Forge: m.Forge, Repo: m.Repo, Number: m.Number, MergeRequest: m.MergeRequest}
}

// MRRef returns the reference of the bot's merge request, valid when MRNumber != 0.
func (m *Mailbox) MRRef() forge.IssueRef {
	return forge.IssueRef{Forge: m.Forge, Repo: m.Repo, Number: m.MRNumber, MergeRequest: true}
}

// StoredEvent is one row of events.
type StoredEvent struct {
	ID         int64       `db:"id"`
	MailboxID  int64       `db:"mailbox_id"`
	Event      forge.Event `db:"-"`
	Payload    string      `db:"payload"`
	ReceivedAt time.Time   `db:"received_at"`
}

// Question is one row of questions.
type Question struct {
	ID          int64      `db:"id"`
	MailboxID   int64      `db:"mailbox_id"`
	Round       int        `db:"round"`
	QID         string     `db:"qid"`
	Title       string     `db:"title"`
	Context     string     `db:"context"`
	OptionsJSON string     `db:"options"`
	Default     string     `db:"default_option"`
	DeadlineAt  time.Time  `db:"deadline_at"`
	Answer      *string    `db:"answer"`
	AnsweredBy  *string    `db:"answered_by"`
	AnsweredAt  *time.Time `db:"answered_at"`
}

// Options decodes the question's options.
func (q *Question) Options() []phase.Option {
	var o []phase.Option
	_ = json.Unmarshal([]byte(q.OptionsJSON), &o)
	return o
}

// Run is one row of runs.
type Run struct {
	ID         int64      `db:"id"`
	MailboxID  int64      `db:"mailbox_id"`
	Phase      string     `db:"phase"`
	Step       string     `db:"step"`
	Attempt    int        `db:"attempt"`
	Status     string     `db:"status"`
	Container  string     `db:"container"`
	StartedAt  time.Time  `db:"started_at"`
	FinishedAt *time.Time `db:"finished_at"`
	ExitCode   *int       `db:"exit_code"`
	Outcome    string     `db:"outcome"`
	Output     string     `db:"output"`
	Result     string     `db:"result"`
	// HeadSHA is the commit a recovered read-write run pushed.
	HeadSHA string `db:"head_sha"`
	// Applied is false for a run finished by recovery whose outcome the machine has not acted
	// on yet (see Machine.applyRecovered); true otherwise.
	Applied bool `db:"applied"`
	// Resumable and NotResumableReason are the session hook of an interrupted run: whether
	// the next run can continue its agent session, or why not.
	Resumable          bool   `db:"resumable"`
	NotResumableReason string `db:"not_resumable_reason"`
	// Rerun is set by Runs.StartRun (not stored) when the same decision (mailbox, phase, step)
	// already has a run still recorded running, or one whose result was collected and never
	// acted on: the phase runs twice for one decision (spec/reliability.md, "Exactly once
	// across restarts and replicas"; counted as alfred_phase_reruns_total).
	Rerun bool `db:"-"`
}

// Run statuses.
const (
	RunRunning     = "running"
	RunSucceeded   = "succeeded"
	RunFailed      = "failed"
	RunInterrupted = "interrupted"
)

// RefusedEdit is one comment edit the gate refused (Data.RefusedEdits).
type RefusedEdit struct {
	// CommentID is the forge's id of the edited comment.
	CommentID int64 `json:"comment_id"`
	// BodyHash is the hex SHA-256 of the comment's body after the edit (first 16 bytes).
	BodyHash string `json:"body_hash"`
}

// maxRefusedEdits bounds Data.RefusedEdits: the oldest go first.
const maxRefusedEdits = 32

// editOf returns the RefusedEdit naming comment c as it now reads.
func editOf(c *forge.Comment) RefusedEdit {
	sum := sha256.Sum256([]byte(c.Body))
	return RefusedEdit{CommentID: c.ID, BodyHash: hex.EncodeToString(sum[:16])}
}
