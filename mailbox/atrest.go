package mailbox

import "github.com/alfred-bot/alfred/webhook/forge"

// OutcomeAtRest is the outcome of an event the store recorded as processed when it stored it,
// because it could change nothing (InertAtRest): the mailbox was at rest (RestStates) with
// every earlier event applied (spec/reliability.md, "Events recorded on arrival").
const OutcomeAtRest = "comment recorded on arrival: Alfred is not working on this issue"

// InertAtRest reports whether ev changes nothing when it is applied to a mailbox at rest (a
// state of RestStates: Alfred is not assigned, or the work is over) whose earlier events have
// all been applied: a comment on an issue, or an edit of one. At rest only a new assignment or
// a review asked of the bot acts (the state table in states.go); a comment there is recorded
// and nothing else happens: no forge call, no run, no state change (the comment's handling in
// events.go answers "comment recorded", "own comment" or "ignored: comment by another bot").
// The store records such an event as processed when it stores it (OutcomeAtRest) instead of
// leaving it to a pass, so that the traffic on issues Alfred does not work on, most of a
// forge's deliveries, costs no claim, read or save. The mailbox's title and author, which a
// pass would copy from the event, keep what the mailbox's first event gave them; a comment on
// a merge request is not inert (the review loop and the reviews of others' merge requests read
// them).
func InertAtRest(ev forge.Event) bool {
	return (ev.Type == forge.EventComment || ev.Type == forge.EventCommentEdited) && !ev.Target.MergeRequest
}

// RestStates names the states at rest, where InertAtRest holds: the states that are not
// Working (idle, done, cancelled), from the state table.
func RestStates() []string { return statesWhere(func(d stateDef) bool { return !d.State.Working() }) }
