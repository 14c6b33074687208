package mailbox

import (
	"fmt"
	"slices"

	"github.com/alfred-bot/alfred/runner/phase"
)

// State is a mailbox's place in the lifecycle. What a state means — its status label, the run
// it starts, the timer that wakes it, the inputs it accepts and where each leads — is its row
// in the lifecycle table below.
type State string

// The states; spec/lifecycle.md draws them and their transitions.
const (
	StateIdle               State = "idle"                // the bot is not assigned
	StateWaitingType        State = "waiting_type"        // asked which type the issue is
	StateFunctionalAnalysis State = "functional_analysis" // analysis.functional run due
	StateWaitingInfo        State = "waiting_info"        // clarification questions open
	StateTechnicalAnalysis  State = "technical_analysis"  // analysis.technical run due
	StateWaitingValidation  State = "waiting_validation"  // plan posted, waiting for ai::validate_plan
	StateInDevelopment      State = "in_development"      // development run due
	StateSelfReview         State = "self_review"         // self_review run due: the bot reads its own merge request
	StateAnswering          State = "answering"           // answer run due (type::question)
	StateInCI               State = "in_ci"               // merge request open, waiting for CI
	StateCIFix              State = "ci_fix"              // ci_fix run due
	StateInReview           State = "in_review"           // waiting for review and merge
	StateReviewFix          State = "review_fix"          // review_fix run due: answer and fix review comments
	StateConflict           State = "conflict_resolution" // merge the target branch, conflict_resolution run if needed
	StateReviewing          State = "reviewing"           // review run due on a merge request that is not the bot's
	StateBlocked            State = "blocked"             // needs a human; "retry" resumes
	StateDone               State = "done"                // merged or closed: mailbox closed
	StateCancelled          State = "cancelled"           // unassigned or closed without merge
)

// Closed reports whether the mailbox no longer acts on events (except a new assignment).
func (s State) Closed() bool { return def(s).closed }

// Working reports whether the bot works on the mailbox: neither idle nor closed.
func (s State) Working() bool { return s != StateIdle && !s.Closed() }

// statusKey names one status label of Labels (see Labels.status).
type statusKey string

// The status labels; the key is the default label's name after "status::".
const (
	statusNone               statusKey = "" // no label of its own: the labels are left as they are
	statusFunctionalAnalysis statusKey = "functional_analysis"
	statusWaitingInfo        statusKey = "waiting_info"
	statusTechnicalAnalysis  statusKey = "technical_analysis"
	statusWaitingValidation  statusKey = "waiting_validation"
	statusInDevelopment      statusKey = "in_development"
	statusInCI               statusKey = "in_ci"
	statusInReview           statusKey = "in_review"
	statusBlocked            statusKey = "blocked"
	statusDone               statusKey = "done"
)

// wake is the timer that brings a mailbox back without an event.
type wake int

const (
	wakeNone     wake = iota // only an event moves it
	wakeRun                  // a run is due: at once (after the backoff of a failed pass)
	wakeDeadline             // the deadline of the open question block
	wakeCIPoll               // every ci_poll, or at the end of ci_wait or the review quiet time when sooner
	wakeReview               // the end of the review quiet time, and every ci_poll for the merge status
)

// input is something a state acts on besides the inputs every working state accepts.
type input int

const (
	inputAnswers    input = iota // replies, ticks in the question block, the deadline
	inputTypeLabel               // a type:: label added by the author or a writer
	inputValidation              // ai::validate_plan added by a writer
	inputRetry                   // "retry" commented by a writer
	inputCI                      // a pipeline event or the CI poll
	inputReview                  // review comments on the bot's merge request, and its merge status
)

// trigger names what moves a mailbox out of a state. Within a state's row, each trigger
// leads to one state.
type trigger string

const (
	onNoType        trigger = "no_type"         // assigned, no type label: ask for it
	onWorkType      trigger = "work_type"       // the type is task, bug or analysis
	onQuestionType  trigger = "question_type"   // the type is question
	onQuestions     trigger = "questions"       // the functional analysis has questions
	onFunctional    trigger = "functional_done" // the functional analysis is complete (task, bug)
	onAnalysisDone  trigger = "analysis_done"   // the functional analysis is the deliverable (analysis)
	onPlanPosted    trigger = "plan_posted"
	onValidated     trigger = "validated"
	onPushed        trigger = "pushed"
	onAnswerPosted  trigger = "answer_posted"
	onCIPassed      trigger = "ci_passed" // CI success, or no pipeline within ci_wait
	onCIFailed      trigger = "ci_failed"
	onCIExhausted   trigger = "ci_exhausted"
	onRunFailed     trigger = "run_failed"
	onNothingPushed trigger = "nothing_pushed"
	onReviewDue     trigger = "review_due"    // review comments waited out their quiet time
	onReviewSpent   trigger = "review_spent"  // review comments, no review_fix attempts left
	onConflict      trigger = "conflict"      // the merge request conflicts with its target
	onAnswered      trigger = "answered"      // review comments answered, nothing to push
	onMergeUpToDate trigger = "up_to_date"    // the branch already contains the target
	onReviewAsked   trigger = "review_asked"  // the bot was asked to review a merge request
	onReviewPosted  trigger = "review_posted" // the review of such a merge request was posted
	onAutoMerged    trigger = "auto_merged"   // Alfred merged its merge request (auto-merge)
	// The triggers of the self-review (selfreview.go).
	onPushedSelfReview   trigger = "pushed_self_review"   // pushed, and a self-review is due
	onSelfReviewClean    trigger = "self_review_clean"    // no blocking finding, or no round left
	onSelfReviewFindings trigger = "self_review_findings" // blocking findings, a round left
	onSelfReviewFailed   trigger = "self_review_failed"   // the self_review run failed its attempts
	// The triggers of workingTransitions and anyStateTransitions.
	onIssueClosed  trigger = "issue_closed"
	onMerged       trigger = "merged"
	onUnassigned   trigger = "unassigned"
	onMRClosed     trigger = "mr_closed"
	onIssueGone    trigger = "issue_gone"
	onBlockedLabel trigger = "blocked_label"
	onPostRefused  trigger = "post_refused" // the forge refused a post with a 4xx
)

// transition is one edge of the lifecycle: on trigger, to state To. When is how
// spec/lifecycle.md labels the edge.
type transition struct {
	On   trigger
	To   State
	When string
}

// stateDef is one row of the lifecycle table.
type stateDef struct {
	State State
	// Status is the state's status label; statusNone leaves the labels as they are.
	Status statusKey
	// Phase and Step are the run the state starts; Phase "" for none.
	Phase phase.Phase
	Step  phase.Step
	// Wake is the timer that wakes the state.
	Wake wake
	// Accepts lists the inputs the state acts on beyond workingTransitions.
	Accepts []input
	// AsksType: the open question block asks for the issue type, so its answer is the type
	// (with inputAnswers); otherwise answers are decisions for the analysis.
	AsksType bool
	// Next lists where each trigger of the state leads.
	Next []transition
	// closed: the lifecycle is over; only a new assignment acts.
	closed bool
}

// assigned is where an assignment by a writer leads from a state that is not working.
var assigned = []transition{
	{onNoType, StateWaitingType, "bot assigned, no type label"},
	{onWorkType, StateFunctionalAnalysis, "bot assigned, type task/bug/analysis"},
	{onQuestionType, StateAnswering, "bot assigned, type question"},
}

// lifecycle is the table of states, in the order spec/lifecycle.md lists them.
var lifecycle = []stateDef{
	{State: StateIdle, Next: append(slices.Clone(assigned),
		transition{onReviewAsked, StateReviewing, "bot asked to review a merge request not its own"})},
	{State: StateWaitingType, Status: statusWaitingInfo, Wake: wakeDeadline, AsksType: true,
		Accepts: []input{inputAnswers, inputTypeLabel}, Next: []transition{
			{onWorkType, StateFunctionalAnalysis, "type label / reply / deadline (task, bug, analysis)"},
			{onQuestionType, StateAnswering, "type question"},
		}},
	{State: StateFunctionalAnalysis, Status: statusFunctionalAnalysis, Phase: phase.Analysis,
		Step: phase.StepFunctional, Wake: wakeRun, Next: []transition{
			{onQuestions, StateWaitingInfo, "result has questions"},
			{onFunctional, StateTechnicalAnalysis, "no questions (task, bug)"},
			{onAnalysisDone, StateInReview, "no questions (analysis)"},
			{onRunFailed, StateBlocked, "run failed"},
		}},
	{State: StateWaitingInfo, Status: statusWaitingInfo, Wake: wakeDeadline,
		Accepts: []input{inputAnswers}, Next: []transition{
			{onFunctional, StateTechnicalAnalysis, "reply / ticks / deadline (task, bug)"},
			{onAnalysisDone, StateInReview, "reply / ticks / deadline (analysis)"},
		}},
	{State: StateTechnicalAnalysis, Status: statusTechnicalAnalysis, Phase: phase.Analysis,
		Step: phase.StepTechnical, Wake: wakeRun, Next: []transition{
			{onPlanPosted, StateWaitingValidation, "plan posted"},
			{onRunFailed, StateBlocked, "run failed"},
		}},
	{State: StateWaitingValidation, Status: statusWaitingValidation, Accepts: []input{inputValidation},
		Next: []transition{
			{onValidated, StateInDevelopment, "ai::validate_plan by a writer"},
		}},
	{State: StateInDevelopment, Status: statusInDevelopment, Phase: phase.Development, Wake: wakeRun,
		Next: []transition{
			{onPushed, StateInCI, "pushed, merge request opened"},
			{onPushedSelfReview, StateSelfReview, "pushed, merge request opened, self-review on"},
			{onRunFailed, StateBlocked, "run failed"},
			{onNothingPushed, StateBlocked, "run changed nothing"},
		}},
	{State: StateSelfReview, Status: statusInDevelopment, Phase: phase.SelfReview, Wake: wakeRun,
		Next: []transition{
			{onSelfReviewClean, StateInCI, "no blocking finding, or no round left: listed in the description"},
			{onSelfReviewFindings, StateReviewFix, "blocking findings, a self_review round left"},
			{onSelfReviewFailed, StateInCI, "self_review run failed twice: said in the description"},
			{onRunFailed, StateBlocked, "budget spent, or cancelled by an operator"},
		}},
	{State: StateAnswering, Status: statusInDevelopment, Phase: phase.Answer, Wake: wakeRun,
		Next: []transition{
			{onAnswerPosted, StateInReview, "answer posted"},
			{onRunFailed, StateBlocked, "run failed"},
		}},
	{State: StateInCI, Status: statusInCI, Wake: wakeCIPoll, Accepts: []input{inputCI, inputReview}, Next: []transition{
		{onCIPassed, StateInReview, "CI success, or no pipeline within ci_wait"},
		{onCIFailed, StateCIFix, "CI failed, attempts left"},
		{onCIExhausted, StateBlocked, "CI failed, no attempts left"},
		{onReviewDue, StateReviewFix, "review comments by a writer, after the quiet time"},
		{onReviewSpent, StateBlocked, "review comments, no review_fix attempts left"},
		{onConflict, StateConflict, "merge request conflicts with its target"},
	}},
	{State: StateCIFix, Status: statusInDevelopment, Phase: phase.CIFix, Wake: wakeRun, Next: []transition{
		{onPushed, StateInCI, "fix pushed"},
		{onPushedSelfReview, StateSelfReview, "fix pushed, self_review.after_fixes on"},
		{onRunFailed, StateBlocked, "run failed"},
		{onNothingPushed, StateBlocked, "run changed nothing"},
	}},
	{State: StateInReview, Status: statusInReview, Wake: wakeReview, Accepts: []input{inputReview}, Next: []transition{
		{onReviewDue, StateReviewFix, "review comments by a writer, after the quiet time"},
		{onReviewSpent, StateBlocked, "review comments, no review_fix attempts left"},
		{onConflict, StateConflict, "merge request conflicts with its target"},
		{onAutoMerged, StateDone, "auto-merge on, CI green, approved, no open thread: merged by Alfred"},
	}},
	{State: StateReviewFix, Status: statusInDevelopment, Phase: phase.ReviewFix, Wake: wakeRun, Next: []transition{
		{onPushed, StateInCI, "fixes pushed, comments answered"},
		{onPushedSelfReview, StateSelfReview, "fixes pushed, self-review again (a round left, or after_fixes)"},
		{onAnswered, StateInCI, "comments answered, nothing to push"},
		{onRunFailed, StateBlocked, "run failed"},
		{onNothingPushed, StateBlocked, "a comment fixed, but no file changed"},
	}},
	{State: StateConflict, Status: statusInDevelopment, Phase: phase.ConflictResolution, Wake: wakeRun, Next: []transition{
		{onPushed, StateInCI, "merge commit pushed"},
		{onMergeUpToDate, StateInCI, "the branch already contains the target"},
		{onRunFailed, StateBlocked, "run failed, or conflict markers left"},
	}},
	{State: StateReviewing, Phase: phase.Review, Wake: wakeRun, Next: []transition{
		{onReviewPosted, StateIdle, "review posted"},
		{onRunFailed, StateBlocked, "run failed"},
	}},
	{State: StateBlocked, Status: statusBlocked, Accepts: []input{inputRetry}},
	{State: StateDone, Status: statusDone, Next: assigned, closed: true},
	{State: StateCancelled, Next: assigned, closed: true},
}

// workingTransitions are accepted by every working state (neither idle nor closed); the
// blocked label and a refused post by every working state but blocked itself. A retry in blocked leads back to
// the state the mailbox was blocked from (Data.BlockedFrom).
var workingTransitions = []transition{
	{onIssueClosed, StateDone, "the issue closed"},
	{onMerged, StateDone, "the bot's merge request merged"},
	{onUnassigned, StateCancelled, "the bot unassigned"},
	{onMRClosed, StateCancelled, "the bot's merge request closed without merge"},
	{onBlockedLabel, StateBlocked, "status::blocked added by a human"},
	{onPostRefused, StateBlocked, "the forge refused a post (HTTP 4xx)"},
}

// notFromBlocked reports the working transitions blocked itself does not take: it is already
// blocked.
func notFromBlocked(on trigger) bool { return on == onBlockedLabel || on == onPostRefused }

// retryWhen names the transition out of blocked: on inputRetry, to the state the mailbox was
// blocked from (Data.BlockedFrom), not a state of the table.
const retryWhen = "retry by a writer"

// anyStateTransitions are accepted in every state.
var anyStateTransitions = []transition{
	{onIssueGone, StateCancelled, "the issue gone (404)"},
}

var byState = func() map[State]*stateDef {
	m := make(map[State]*stateDef, len(lifecycle))
	for i := range lifecycle {
		m[lifecycle[i].State] = &lifecycle[i]
	}
	return m
}()

// def returns the table row of s; an unknown state reads as a row with nothing in it.
func def(s State) *stateDef {
	if d, ok := byState[s]; ok {
		return d
	}
	return &stateDef{State: s}
}

// runKey returns the key of the run the state starts ("analysis.functional", "development"),
// "" when it starts none.
func (d *stateDef) runKey() string {
	if d.Phase == "" {
		return ""
	}
	return phase.KeyOf(d.Phase, d.Step)
}

// accepts reports whether the state acts on in.
func (d *stateDef) accepts(in input) bool {
	for _, a := range d.Accepts {
		if a == in {
			return true
		}
	}
	return false
}

// next returns where trigger on leads from state s: the state's own row first, then
// workingTransitions for a working state, then anyStateTransitions. An error names a trigger the table does not allow
// in s (a defect of the machine, reported rather than acted on).
func next(s State, on trigger) (State, error) {
	for _, t := range def(s).Next {
		if t.On == on {
			return t.To, nil
		}
	}
	if s.Working() && !(notFromBlocked(on) && s == StateBlocked) {
		for _, t := range workingTransitions {
			if t.On == on {
				return t.To, nil
			}
		}
	}
	for _, t := range anyStateTransitions {
		if t.On == on {
			return t.To, nil
		}
	}
	return "", fmt.Errorf("mailbox: no transition from %s on %s", s, on)
}
