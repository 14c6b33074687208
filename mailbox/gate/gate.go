// Package gate is Alfred's one authorization table: every human input — labels, comments and
// answers, assignments, review requests, `ai::…` commands — passes Decide before it has any
// effect. The table is input kind × state × forge role → allowed, refused (said once, with one
// explanation) or ignored (no effect, recorded); spec/authorization.md holds it and
// mailbox/gate's spec test checks the two against each other. Which role each kind needs is
// configuration (Needs, internal/config's `permissions:`), with safe defaults: writing steers.
//
// The package imports only the vocabulary leaf webhook/forge (the roles), so that mailbox — the
// one place that consults it — and the operator's side can both read it.
package gate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Kind is the kind of a human input.
type Kind string

// The input kinds (spec/authorization.md, "Inputs").
const (
	// SteerLabel: a label that steers Alfred, added (ai::validate_plan, ai::retry,
	// ai::retry_once, ai::retry_until_green, ai::auto_merge, status::blocked) or removed
	// (status::blocked, which resumes).
	SteerLabel Kind = "steer_label"
	// StateLabel: a status::… label (other than status::blocked) or a type::… label.
	StateLabel Kind = "state_label"
	// Answer: a comment (or ticks in Alfred's question block) answering open questions.
	Answer Kind = "answer"
	// Command: a `retry` comment, the `ai` command of a comment.
	Command Kind = "command"
	// Assign: the bot assigned to an issue (it starts the lifecycle).
	Assign Kind = "assign"
	// Unassign: the bot unassigned from an issue (it cancels the work).
	Unassign Kind = "unassign"
	// Review: a review or comment on the bot's merge request that asks for changes (it starts
	// a review_fix).
	Review Kind = "review"
	// Approval: an approval of the bot's merge request, as the merge gate counts it.
	Approval Kind = "approval"
)

// Kinds lists every kind, in the order of the spec's table.
func Kinds() []Kind {
	return []Kind{SteerLabel, StateLabel, Answer, Command, Assign, Unassign, Review, Approval}
}

// State is the state of the mailbox as the gate sees it.
type State string

// The states the table tells apart.
const (
	// Idle: no lifecycle runs: before the bot is assigned, and after done or cancelled.
	Idle State = "idle"
	// Working: any working state but blocked, whether a run holds the mailbox or not.
	Working State = "working"
	// Blocked: the blocked state.
	Blocked State = "blocked"
)

// States lists the states, in the order of the spec's table.
func States() []State { return []State{Idle, Working, Blocked} }

// Decision is what happens to an input.
type Decision string

// The decisions.
const (
	// Allowed: the input goes on to the state table, which may still find nothing to do.
	Allowed Decision = "allowed"
	// Refused: the input has no effect; a label is removed; the person is told why once per
	// issue (per round for answers, per block for commands); it is recorded and counted.
	Refused Decision = "refused"
	// Ignored: the input has no effect and nobody is told; it is recorded.
	Ignored Decision = "ignored"
)

// Needs is the role each kind needs. Zero fields take DefaultNeeds' values.
type Needs map[Kind]forge.Role

// DefaultNeeds returns the defaults: steering needs write (push and merge rights); unassigning
// needs no role of Alfred's: the forge lets only triage and up change the assignees, and
// Alfred takes its word.
func DefaultNeeds() Needs {
	return Needs{
		SteerLabel: forge.RoleWrite,
		StateLabel: forge.RoleWrite,
		Answer:     forge.RoleWrite,
		Command:    forge.RoleWrite,
		Assign:     forge.RoleWrite,
		Unassign:   forge.RoleNone,
		Review:     forge.RoleWrite,
		Approval:   forge.RoleWrite,
	}
}

// Need returns the role kind k needs under n (DefaultNeeds' for a kind n does not name).
func (n Needs) Need(k Kind) forge.Role {
	if r, ok := n[k]; ok {
		return r
	}
	return DefaultNeeds()[k]
}

// Validate reports a kind n names that is not one.
func (n Needs) Validate() error {
	for k := range n {
		if !slices.Contains(Kinds(), k) {
			return fmt.Errorf("gate: unknown input kind %q (one of %s)", k, kindNames())
		}
	}
	return nil
}

func kindNames() string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, string(k))
	}
	return strings.Join(out, ", ")
}

// Input is one human input as the gate judges it.
type Input struct {
	Kind  Kind
	State State
	// Role is the sender's role in the repository, as the forge reports it.
	Role forge.Role
	// Author is true when the sender wrote the issue: the author may answer the questions
	// Alfred asks them and set the type whatever their role.
	Author bool
}

// below is what happens to an input of a kind in a state when its sender lacks the role.
var below = map[Kind]map[State]Decision{
	SteerLabel: {Idle: Refused, Working: Refused, Blocked: Refused},
	StateLabel: {Idle: Ignored, Working: Ignored, Blocked: Ignored},
	Answer:     {Idle: Ignored, Working: Refused, Blocked: Ignored},
	Command:    {Idle: Ignored, Working: Ignored, Blocked: Refused},
	Assign:     {Idle: Refused, Working: Ignored, Blocked: Ignored},
	Unassign:   {Idle: Ignored, Working: Refused, Blocked: Refused},
	Review:     {Idle: Ignored, Working: Refused, Blocked: Refused},
	Approval:   {Idle: Ignored, Working: Ignored, Blocked: Ignored},
}

// authorMay lists the kinds the author may do whatever their role.
var authorMay = []Kind{Answer, StateLabel}

// Decide judges in under needs: Allowed when the sender has the role the kind needs (or is the
// issue's author, for an answer or a type label); otherwise the table's decision for the kind
// and state. An unknown kind or state is Ignored.
func Decide(needs Needs, in Input) Decision {
	if in.Role >= needs.Need(in.Kind) || (in.Author && slices.Contains(authorMay, in.Kind)) {
		if _, ok := below[in.Kind][in.State]; ok {
			return Allowed
		}
	}
	if d, ok := below[in.Kind][in.State]; ok {
		return d
	}
	return Ignored
}

// Reason returns the short reason of a refusal or an ignored input for the run history and
// the alfred_refused_inputs_total counter's reason label: "role_below_<need>".
func Reason(needs Needs, k Kind) string { return "role_below_" + needs.Need(k).String() }
