package mailbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// ReconcileView is what a mailbox knew of its issue when it was last compared with the forge:
// the lists and state the machine last applied, and the forge's updated times seen then.
type ReconcileView struct {
	// MailboxID names the mailbox in derived delivery ids.
	MailboxID int64
	// Ref is the issue.
	Ref forge.IssueRef
	// Author is the issue's author login; edits of the bot's question block found by
	// reconciliation are attributed to them (the forges do not name who edited a comment, and
	// only the author or a member with write access can tick another's comment).
	Author string
	// Labels and Assignees are the mailbox's last known lists.
	Labels, Assignees []string
	// MRNumber and HeadSHA are the bot's merge request and its last known head (0, "": none).
	MRNumber int64
	HeadSHA  string
	// IssueUpdatedAt and MRUpdatedAt are the updated times seen at the last pass (zero: never);
	// CommentsSince is the time from which comments are still to be read (the newest comment
	// seen is read again; its derived event has the same delivery id and is a duplicate).
	IssueUpdatedAt, MRUpdatedAt, CommentsSince time.Time
	// OwnBody reports whether body is what the bot last wrote in its comment with marker key:
	// an edit of the bot's comment that it made itself is not an event. Nil: every edit of a bot
	// comment is taken as the bot's own.
	OwnBody func(key, body string) bool
	// ReviewComments makes a merge request that moved without a new head be read for the
	// review comments made since the last look (the polling transport, whose forge sends no
	// delivery for them; spec/transport.md). Off for reconciliation, which then leaves the
	// merge request's updated time as it was (Derived.MRUpdatedAt): the change it did not read
	// stays for the poll.
	ReviewComments bool
	// Asking is set while the mailbox waits for answers to its question block: its comments
	// are read at every look, whether or not the issue's updated time moved, since Forgejo
	// and Gitea leave an issue's updated time alone when a comment is edited (a tick in the
	// block) and notify nobody of the edit.
	Asking bool
}

// UpdatedSettle is how long after an issue's updated time a look still reads the issue as
// changed and keeps the updated time seen before (Derived.IssueUpdatedAt): the forges store
// these times to the second (Forgejo, Gitea), so a comment made later in the second of the
// look leaves the time equal, and a look within that second would otherwise never read it.
// It also covers a forge clock up to this much behind Alfred's.
const UpdatedSettle = time.Minute

// Derived is what one comparison of a mailbox with its forge found.
type Derived struct {
	// Events are the differences as inbound events, ready for Store.Deliver: each has a delivery
	// id and body hash of its own ("reconcile:…"), equal for equal findings, so a difference
	// seen by two passes is stored once.
	Events []forge.Event
	// IssueUpdatedAt, MRUpdatedAt and CommentsSince are the view's times to store for the next
	// pass. IssueUpdatedAt is the issue's updated time once it is UpdatedSettle old; a more
	// recent one leaves the view's, so that the next look reads the issue again.
	IssueUpdatedAt, MRUpdatedAt, CommentsSince time.Time
	// Calls counts the forge API calls made (pages not included).
	Calls int
	// Unattributed lists the changes seen whose author the forge's history does not name; they
	// are not turned into events.
	Unattributed []string
	// More is set by DeriveAssignments when untracked assignments beyond its limit were left
	// for a later search.
	More bool
	// Assigned are the issues DeriveAssignments turned into events (Ref.Forge set).
	Assigned []forge.Issue
	// seen is the issue's updated time as read: it names the events this look derives (add).
	seen time.Time
}

// DeriveEvents compares one open mailbox with its forge and returns the differences as events.
// An issue whose updated time did not move costs one call (Issue), unless the time is less than
// UpdatedSettle old (then it is read as moved) or the mailbox waits for answers
// (ReconcileView.Asking: then its comments are read too); the merge request is read only when
// the mailbox has one. The issue's comments since the view's CommentsSince become comment
// events (the machine applies each comment id once, so a comment that also came as a delivery
// does not act twice). A deleted issue becomes an issue_closed event, when its repository can
// still be read. bot is the bot's login; now stamps the events' ReceivedAt.
func DeriveEvents(ctx context.Context, f forge.Forge, bot string, v ReconcileView, now time.Time) (Derived, error) {
	d := Derived{IssueUpdatedAt: v.IssueUpdatedAt, MRUpdatedAt: v.MRUpdatedAt, CommentsSince: v.CommentsSince}
	base := forge.Event{Forge: v.Ref.Forge, Kind: f.Kind(), Target: v.Ref, ReceivedAt: now, Header: "reconcile"}
	is, err := f.Issue(ctx, v.Ref)
	d.Calls++
	if errors.Is(err, forge.ErrNotFound) {
		// Both forges answer 404 for a repository the token cannot see: only an issue of a
		// repository that can still be read is gone; a bot that lost its access (removed from
		// the project, a group sync) closes nothing.
		if _, rerr := f.Repository(ctx, v.Ref.Repo); rerr != nil {
			d.Calls++
			return d, fmt.Errorf("reconcile %s: neither the issue nor its repository can be read (the repository deleted, or the bot's access lost): %w", v.Ref, rerr)
		}
		d.Calls++
		ev := base
		ev.Type, ev.Action, ev.State = forge.EventIssueClosed, "deleted", "closed"
		d.add(v, ev, "deleted")
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("reconcile %s: %w", v.Ref, err)
	}
	d.seen = is.UpdatedAt
	settling := now.Sub(is.UpdatedAt) < UpdatedSettle
	switch {
	case !is.UpdatedAt.Equal(v.IssueUpdatedAt) || v.IssueUpdatedAt.IsZero() || settling:
		if !settling {
			d.IssueUpdatedAt = is.UpdatedAt
		}
		if err := d.issue(ctx, f, bot, v, base, is); err != nil {
			return d, err
		}
	case v.Asking:
		// Unchanged but waiting for answers: only the comments (an edit leaves the time alone).
		base.Title, base.Body, base.Author = is.Title, is.Body, is.Author
		if err := d.comments(ctx, f, bot, v, base); err != nil {
			return d, err
		}
	}
	if v.MRNumber != 0 {
		if err := d.mergeRequest(ctx, f, bot, v, base); err != nil {
			return d, err
		}
	}
	return d, nil
}

// issue derives the state, assignee, label and comment differences of a changed issue.
func (d *Derived) issue(ctx context.Context, f forge.Forge, bot string, v ReconcileView, base forge.Event, is *forge.Issue) error {
	base.Title, base.Body, base.Author = is.Title, is.Body, is.Author
	addedLabels, removedLabels := diff(v.Labels, is.Labels)
	addedAssignees, removedAssignees := diff(v.Assignees, is.Assignees)
	closed := is.State == "closed"
	var history []forge.Activity
	if closed || len(addedLabels)+len(removedLabels)+len(addedAssignees)+len(removedAssignees) > 0 {
		since := v.IssueUpdatedAt
		if !since.IsZero() {
			since = since.Add(-time.Minute) // forge clocks round to the second; read a little more
		}
		h, err := f.Activity(ctx, v.Ref, since)
		d.Calls++
		if err != nil {
			return fmt.Errorf("reconcile %s: read history: %w", v.Ref, err)
		}
		history = h
	}
	if len(addedAssignees)+len(removedAssignees) > 0 {
		ev := base
		ev.Type, ev.AssigneesKnown, ev.Assignees = forge.EventAssignees, true, slices.Clone(is.Assignees)
		changed := append(slices.Clone(addedAssignees), removedAssignees...)
		if containsFold(changed, bot) { // the change that matters is the bot's own (un)assignment
			changed = []string{bot}
		}
		d.attributed(v, bot, ev, history, "assignees "+strings.Join(is.Assignees, ","), func(a forge.Activity) bool {
			return (a.Kind == forge.ActivityAssigned || a.Kind == forge.ActivityUnassigned) && containsFold(changed, a.Login)
		})
	}
	if len(addedLabels)+len(removedLabels) > 0 {
		d.labels(v, bot, base, history, is.Labels, addedLabels, removedLabels)
	}
	if err := d.comments(ctx, f, bot, v, base); err != nil {
		return err
	}
	if closed {
		ev := base
		ev.Type, ev.State = forge.EventIssueClosed, "closed"
		d.attributed(v, bot, ev, history, "closed", func(a forge.Activity) bool { return a.Kind == forge.ActivityClosed })
	}
	return nil
}

// comments derives an event per comment created or edited since the view's CommentsSince.
func (d *Derived) comments(ctx context.Context, f forge.Forge, bot string, v ReconcileView, base forge.Event) error {
	cs, err := f.CommentsSince(ctx, v.Ref, v.CommentsSince)
	d.Calls++
	if err != nil {
		return fmt.Errorf("reconcile %s: read comments: %w", v.Ref, err)
	}
	for _, c := range cs {
		ev := base
		ev.Type, ev.Comment, ev.Sender = forge.EventComment, &c, c.Author
		edited := c.UpdatedAt.After(c.CreatedAt) && c.CreatedAt.Before(v.CommentsSince)
		if c.UpdatedAt.After(d.CommentsSince) {
			d.CommentsSince = c.UpdatedAt
		}
		if strings.EqualFold(c.Author.Login, bot) {
			// The bot's own comment: only a human's edit of it (ticks in the question block) is
			// an event, attributed to the issue's author.
			key, _, marked := ParseMarker(c.Body)
			if !marked || v.OwnBody == nil || v.OwnBody(key, c.Body) {
				continue
			}
			edited, ev.Sender = true, forge.User{Login: v.Author}
		}
		if edited {
			ev.Type = forge.EventCommentEdited
		}
		d.addStable(v, ev, fmt.Sprintf("comment %d %s", c.ID, c.UpdatedAt.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

// mergeRequest derives merged, closed and new-head events of the bot's merge request.
func (d *Derived) mergeRequest(ctx context.Context, f forge.Forge, bot string, v ReconcileView, base forge.Event) error {
	mr, err := f.MergeRequest(ctx, v.Ref.Repo, v.MRNumber)
	d.Calls++
	if errors.Is(err, forge.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reconcile %s!%d: %w", v.Ref.Repo, v.MRNumber, err)
	}
	if mr.UpdatedAt.Equal(v.MRUpdatedAt) && !v.MRUpdatedAt.IsZero() {
		return nil
	}
	if v.ReviewComments { // only a look that reads the review comments may pass the change
		d.MRUpdatedAt = mr.UpdatedAt
	}
	ev := base
	ev.Target = forge.IssueRef{Forge: v.Ref.Forge, Repo: v.Ref.Repo, Number: mr.Number, MergeRequest: true}
	ev.MergeRequest, ev.Sender = mr, mr.Author
	switch {
	case mr.Merged:
		ev.Type = forge.EventMergeRequestMerged
	case mr.State == "closed":
		ev.Type = forge.EventMergeRequestClosed
	case mr.HeadSHA != "" && mr.HeadSHA != v.HeadSHA:
		ev.Type = forge.EventMergeRequestUpdated
	default:
		if v.ReviewComments {
			return d.reviewComments(ctx, f, bot, v, base, ev.Target)
		}
		return nil
	}
	d.addStable(v, ev, "merge request "+string(ev.Type)+" "+mr.HeadSHA)
	if v.ReviewComments && ev.Type == forge.EventMergeRequestUpdated {
		return d.reviewComments(ctx, f, bot, v, base, ev.Target)
	}
	return nil
}

// reviewComments derives the review comments of others on the bot's merge request mrRef made
// since the merge request was last seen (the view's MRUpdatedAt, else CommentsSince): a
// comment in the diff, in a review thread or in the conversation becomes a comment event on the
// merge request, a review's summary a review event with the review's state, each named by the
// forge's comment id as a delivery would name it. The forge's review calls are used when it has them (both
// clients do).
func (d *Derived) reviewComments(ctx context.Context, f forge.Forge, bot string, v ReconcileView, base forge.Event, mrRef forge.IssueRef) error {
	rv, ok := f.(forge.Reviews)
	if !ok {
		return nil
	}
	since := v.MRUpdatedAt
	if since.IsZero() {
		since = v.CommentsSince
	}
	list, err := rv.ReviewComments(ctx, mrRef.Repo, mrRef.Number)
	d.Calls++
	if err != nil {
		return fmt.Errorf("reconcile %s: read review comments: %w", mrRef, err)
	}
	// The merge request's conversation too: a comment there that addresses the bot asks for a
	// review_fix as a delivery of it would (Forgejo's review calls do not list it; GitLab's
	// do, as general notes, and the same id is not taken twice).
	conv, err := f.CommentsSince(ctx, mrRef, since)
	d.Calls++
	if err != nil {
		return fmt.Errorf("reconcile %s: read the conversation: %w", mrRef, err)
	}
	for _, c := range conv {
		if slices.ContainsFunc(list, func(r forge.ReviewComment) bool { return r.ID == c.ID }) {
			continue
		}
		list = append(list, forge.ReviewComment{ID: c.ID, Author: c.Author, Body: c.Body, CreatedAt: c.CreatedAt})
	}
	for _, c := range list {
		if c.CreatedAt.Before(since) || strings.EqualFold(c.Author.Login, bot) {
			continue
		}
		ev := base
		ev.Target, ev.Sender, ev.OccurredAt = mrRef, c.Author, c.CreatedAt
		if c.Position == nil && c.ReviewID != 0 {
			ev.Type, ev.Review, ev.Body = forge.EventReview, &forge.Review{State: c.ReviewState, Body: c.Body}, c.Body
		} else {
			ev.Type = forge.EventComment
			ev.Comment = &forge.Comment{ID: c.ID, Body: c.Body, Author: c.Author, CreatedAt: c.CreatedAt, Thread: c.Thread, Position: c.Position}
		}
		d.addStable(v, ev, fmt.Sprintf("review comment %d", c.ID))
	}
	return nil
}

// labels derives the label changes from the view's labels to now: one labels event for each
// run of history entries by one person, in order, so that the gate judges each person's labels
// under their own role. Only the entries of labels whose change the difference shows count
// (added, removed), and of those only the last entry of each label: an earlier one (a change
// already handled, or undone since) is never judged again. Each event carries the labels before
// the person's run (PreviousLabels) and with the changes of theirs that stand (Labels); the
// mailbox applies that difference alone (labelEvent), not the list. The bot's own runs add no
// event. A change the history does not show is recorded as unattributed and not taken: the next
// look finds it again.
func (d *Derived) labels(v ReconcileView, bot string, base forge.Event, history []forge.Activity, now, added, removed []string) {
	type change struct {
		label string
		add   bool
	}
	type run struct {
		actor   forge.User
		at      time.Time
		prev    []string
		changes []change
	}
	var entries []int // indexes in history of the entries that count, oldest first
	last := map[string]int{}
	for i, a := range history {
		if (a.Kind == forge.ActivityLabelAdded && containsFold(added, a.Label)) ||
			(a.Kind == forge.ActivityLabelRemoved && containsFold(removed, a.Label)) {
			entries = append(entries, i)
			last[strings.ToLower(a.Label)] = i
		}
	}
	var runs []run
	cur := slices.Clone(v.Labels)
	for _, i := range entries {
		a := history[i]
		if n := len(runs); n == 0 || !strings.EqualFold(runs[n-1].actor.Login, a.Actor.Login) {
			runs = append(runs, run{actor: a.Actor, prev: slices.Clone(cur)})
		}
		r := &runs[len(runs)-1]
		r.at = a.At
		add := a.Kind == forge.ActivityLabelAdded
		if add && !containsFold(cur, a.Label) {
			cur = append(cur, a.Label)
		} else if !add {
			cur = slices.DeleteFunc(cur, func(l string) bool { return strings.EqualFold(l, a.Label) })
		}
		if last[strings.ToLower(a.Label)] == i {
			r.changes = append(r.changes, change{label: a.Label, add: add})
		}
	}
	if a, r := diff(cur, now); len(a)+len(r) > 0 {
		d.Unattributed = append(d.Unattributed, "labels "+strings.Join(now, ","))
	}
	for _, r := range runs {
		if len(r.changes) == 0 || strings.EqualFold(r.actor.Login, bot) {
			continue // superseded by later entries, or the bot's own change: the machine made it
		}
		// Before the run each label it changed stood the other way (an add was absent, a removal
		// present), whatever the entries before it say (a change the history leaves out).
		prev, labels := slices.Clone(r.prev), slices.Clone(r.prev)
		for _, c := range r.changes {
			prev = slices.DeleteFunc(prev, func(l string) bool { return strings.EqualFold(l, c.label) })
			labels = slices.DeleteFunc(labels, func(l string) bool { return strings.EqualFold(l, c.label) })
			if c.add {
				labels = append(labels, c.label)
			} else {
				prev = append(prev, c.label)
			}
		}
		ev := base
		ev.Type, ev.LabelsKnown, ev.PreviousLabels, ev.Labels = forge.EventLabels, true, prev, labels
		ev.Sender, ev.OccurredAt = r.actor, r.at
		d.add(v, ev, "labels "+strings.Join(labels, ",")+" by "+strings.ToLower(r.actor.Login))
	}
}

// attributed adds ev with the actor of the newest history entry that matches, or records the
// change as unattributed when none does. A change the bot made itself is dropped.
func (d *Derived) attributed(v ReconcileView, bot string, ev forge.Event, history []forge.Activity, what string, match func(forge.Activity) bool) {
	for i := len(history) - 1; i >= 0; i-- {
		if match(history[i]) {
			if strings.EqualFold(history[i].Actor.Login, bot) {
				return // the bot's own change: the machine made it and knows it
			}
			ev.Sender = history[i].Actor
			ev.OccurredAt = history[i].At
			d.add(v, ev, what)
			return
		}
	}
	d.Unattributed = append(d.Unattributed, what)
}

// derivedAction is the Action of every event the reconciliation (and the poll) derives.
const derivedAction = "reconcile"

// add gives ev its derived delivery id and body hash: a hash of the mailbox, the event type,
// what was seen and the issue's updated time, so a later, different change with the same
// content (a label added again) is a new event while the same finding twice is one.
func (d *Derived) add(v ReconcileView, ev forge.Event, what string) {
	d.addStable(v, ev, what+"\x00"+d.seen.UTC().Format(time.RFC3339Nano))
}

// addStable is add for findings that name themselves (a comment by its id and edit time, a
// merge request by its head): their id does not depend on the issue's updated time.
func (d *Derived) addStable(v ReconcileView, ev forge.Event, what string) {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%s\x00%s", v.MailboxID, ev.Target, ev.Type, what))
	h := hex.EncodeToString(sum[:])
	ev.DeliveryID, ev.BodyHash, ev.Action = "reconcile:"+h[:32], h, derivedAction
	d.Events = append(d.Events, ev)
}

// DeriveAssignments finds the open issues assigned to the bot on f, updated at or after since,
// that skip does not leave out (it leaves out those with an open mailbox, those of another
// installation, and those already derived at the same updated time), and returns an assignees
// event for each, attributed to whoever assigned the bot. Every assigned issue is listed (every
// page), and at most limit of those not left out (<= 0: all) are derived, most recently
// updated first, each with a read of its history: the issues Alfred already works on never
// hide a missed one behind the limit. Those beyond it set Derived.More. forgeName is the
// configured forge name, set in the refs skip is given.
func DeriveAssignments(ctx context.Context, f forge.Forge, forgeName, bot string, since time.Time, limit int,
	skip func(forge.Issue) (bool, error), now time.Time) (Derived, error) {
	var d Derived
	list, err := f.AssignedIssues(ctx, since, 0)
	d.Calls++
	if err != nil {
		return d, fmt.Errorf("reconcile %s: search the bot's assignments: %w", forgeName, err)
	}
	for _, is := range list {
		is.Ref.Forge = forgeName
		ok, err := skip(is)
		if err != nil {
			return d, err
		}
		if ok {
			continue
		}
		if limit > 0 && len(d.Assigned) == limit {
			d.More = true
			break
		}
		if err := d.assignment(ctx, f, bot, is, is.Ref, now); err != nil {
			return d, err
		}
		d.Assigned = append(d.Assigned, is)
	}
	d.IssueUpdatedAt = time.Time{}
	return d, nil
}

// assignment derives the assignees event of issue is (ref: with the configured forge name),
// attributed to whoever assigned the bot as its history says.
func (d *Derived) assignment(ctx context.Context, f forge.Forge, bot string, is forge.Issue, ref forge.IssueRef, now time.Time) error {
	history, err := f.Activity(ctx, ref, time.Time{})
	d.Calls++
	if err != nil {
		return fmt.Errorf("reconcile %s: read history: %w", ref, err)
	}
	ev := forge.Event{
		Forge: ref.Forge, Kind: f.Kind(), Target: ref, ReceivedAt: now, Header: "reconcile",
		Type: forge.EventAssignees, AssigneesKnown: true, Assignees: slices.Clone(is.Assignees),
		LabelsKnown: true, Labels: slices.Clone(is.Labels), Title: is.Title, Body: is.Body, Author: is.Author,
	}
	view := ReconcileView{Ref: ref}
	d.IssueUpdatedAt, d.seen = is.UpdatedAt, is.UpdatedAt // the event's id names the time seen
	d.attributed(view, bot, ev, history, "assigned "+strings.Join(is.Assignees, ","), func(a forge.Activity) bool {
		return a.Kind == forge.ActivityAssigned && strings.EqualFold(a.Login, bot)
	})
	return nil
}
