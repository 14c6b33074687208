package mailbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// errEventsHeld is returned by a pass that had to leave events of its mailbox pending (see
// applyEventsHeld): the worker comes back after a short pause instead of at once.
var errEventsHeld = errors.New("mailbox: events wait for a stored run outcome to be applied")

// applyEvents is applyEventsHeld without the held report.
func (m *Machine) applyEvents(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	progressed, _, err := m.applyEventsHeld(ctx, bot, mb)
	return progressed, err
}

// eventBatch bounds the event groups whose processed marks one transaction commits.
const eventBatch = 200

// applyEventsHeld applies the pending events, folded (foldEvents), and reports whether it
// applied any. Each group's processed mark is saved with the mailbox in one transaction
// (Store.SaveProcessed); a run of groups whose handling did nothing outside the mailbox value
// (no forge call, store write or job: effects) shares one transaction, committed with the first
// group that does something, or after eventBatch groups, or at the end. An event that does
// something thus commits the same way as before, and a stop before a commit only leaves events
// to apply again whose application changed nothing else (spec/reliability.md, "Event
// processing"). When a group fails behind such a run, or a shared commit fails, the mailbox is
// read again and its events are applied one transaction each, so that the failure is counted
// against the group that caused it (setAside).
//
// While the state's run has an outcome stored and not yet acted on (the run just ended, or the
// process stopped before acting on it), only events that end the work (a cancel,
// status::blocked) are applied; the others (an answer to the questions that outcome posts) stay
// pending until it is acted on, so that they meet the state it leads to; held reports that some
// did.
func (m *Machine) applyEventsHeld(ctx context.Context, bot Bot, mb *Mailbox) (progressed, held bool, err error) {
	return m.applyPending(ctx, bot, mb, eventBatch)
}

// applyPending is applyEventsHeld committing at most limit groups a transaction.
func (m *Machine) applyPending(ctx context.Context, bot Bot, mb *Mailbox, limit int) (progressed, held bool, err error) {
	evs, err := m.store.PendingEvents(ctx, mb.ID)
	if err != nil || len(evs) == 0 {
		return false, false, err
	}
	waiting, err := m.outcomeWaiting(ctx, mb)
	if err != nil {
		return false, false, err
	}
	fx := new(effects)
	w, wbot := m.watched(fx), fx.bot(bot)
	var batch []Processed
	for _, g := range foldEvents(evs) {
		if waiting && !m.endsWork(g.last.Event, bot, mb) {
			held = true
			continue
		}
		progressed = true
		before := fx.count()
		outcome, err := w.handle(ctx, wbot, mb, g.last)
		if err != nil && len(batch) > 0 {
			return m.applyOneByOne(ctx, bot, mb, err)
		}
		if err == nil {
			batch = append(batch, Processed{IDs: g.ids, Outcome: outcome})
			if fx.count() != before || len(batch) >= limit {
				err = m.store.SaveProcessed(ctx, mb, batch)
				if err != nil && len(batch) > 1 {
					return m.applyOneByOne(ctx, bot, mb, err)
				}
				batch = nil
			}
		}
		if err != nil {
			if aside, ferr := m.setAside(ctx, bot, mb, g, err); ferr != nil || !aside {
				return true, held, cmp.Or(ferr, err)
			}
			continue
		}
		m.log.Debug("event applied", "mailbox_id", mb.ID, "event", g.last.Event.Type, "outcome", outcome)
		if waiting && !mb.State.Working() {
			waiting = false // the work ended: nothing is left to wait for
		}
	}
	if len(batch) > 0 {
		if err := m.store.SaveProcessed(ctx, mb, batch); err != nil {
			return m.applyOneByOne(ctx, bot, mb, err)
		}
	}
	return progressed, held, nil
}

// applyOneByOne drops what applyPending applied of mb since its last commit (events that
// changed nothing else), reads the mailbox again and applies its pending events one
// transaction each, after cause stopped a shared commit.
func (m *Machine) applyOneByOne(ctx context.Context, bot Bot, mb *Mailbox, cause error) (bool, bool, error) {
	if errors.Is(cause, ErrLeaseLost) {
		return true, false, cause // another holder decides now
	}
	m.log.Debug("applying the events one by one", "mailbox_id", mb.ID, "err", cause)
	if err := m.reread(ctx, mb); err != nil {
		return true, false, errors.Join(cause, err)
	}
	return m.applyPending(ctx, bot, mb, 1)
}

// reread reads mb again in place, keeping the lease it was read under: when the mailbox's lease
// owner changed since (another worker or replica claimed it), mb is left as it is and the
// error wraps ErrLeaseLost, so that the pass cannot go on under the new holder's lease.
func (m *Machine) reread(ctx context.Context, mb *Mailbox) error {
	fresh, err := m.store.Get(ctx, mb.ID)
	if err != nil {
		return err
	}
	if now, then := deref(fresh.LeaseOwner), deref(mb.LeaseOwner); now != then {
		return fmt.Errorf("mailbox %d: held by %q since it was read under %q: %w", mb.ID, now, then, ErrLeaseLost)
	}
	*mb = *fresh
	return nil
}

// outcomeWaiting reports whether the run of mb's state ended with an outcome not acted on yet.
func (m *Machine) outcomeWaiting(ctx context.Context, mb *Mailbox) (bool, error) {
	d := def(mb.State)
	if d.Phase == "" || !mb.State.Working() {
		return false, nil
	}
	r, err := m.store.UnappliedRun(ctx, mb.ID, string(d.Phase), string(d.Step))
	return r != nil, err
}

// endsWork reports whether ev stops the mailbox's work: it cancels it (cancels), or a human
// adds the blocked label.
func (m *Machine) endsWork(ev forge.Event, bot Bot, mb *Mailbox) bool {
	return cancels(ev, bot, mb, m.cfg.Labels.Blocked)
}

// setAside counts a failed attempt to apply the events of g and, once they have failed
// PoisonAttempts times, sets them aside so the mailbox goes on with the rest: the mailbox is
// read again first (the failed attempt may have changed it in memory only; a lease that changed
// hands counts nothing) and the issue says once what could not be processed. Failures worth
// waiting for — the forge unavailable, the issue gone, the pass stopped, the lease lost — are
// not counted. It reports whether g was set aside.
func (m *Machine) setAside(ctx context.Context, bot Bot, mb *Mailbox, g eventGroup, applyErr error) (bool, error) {
	if errors.Is(applyErr, forge.ErrUnavailable) || errors.Is(applyErr, forge.ErrNotFound) || errors.Is(applyErr, ErrLeaseLost) ||
		errors.Is(applyErr, context.Canceled) || errors.Is(applyErr, context.DeadlineExceeded) || ctx.Err() != nil {
		return false, nil
	}
	// Read again first: the failed attempt may have changed mb in memory only, and a lease
	// that changed hands since must not count an attempt (the store does not fence FailEvents).
	if err := m.reread(ctx, mb); err != nil {
		return false, err
	}
	n, err := m.store.FailEvents(ctx, g.ids, m.cfg.Redact(applyErr.Error()), m.cfg.PoisonAttempts)
	if err != nil || n == 0 {
		return false, err
	}
	ev := g.last.Event
	m.log.Error("event set aside after repeated failures", "mailbox_id", mb.ID, "event_id", g.last.ID,
		"event", ev.Type, "delivery_id", ev.DeliveryID, "attempts", m.cfg.PoisonAttempts, "err", applyErr)
	what := string(ev.Type)
	if ev.Sender.Login != "" {
		what += " by @" + ev.Sender.Login
	}
	body := fmt.Sprintf("I could not process an update of this issue (%s, received %s) after %d tries, so I set it aside: %s\n\n"+
		"I go on with everything else. If something you did here had no effect, please do it again.",
		what, ev.ReceivedAt.UTC().Format("2006-01-02 15:04 UTC"), m.cfg.PoisonAttempts, m.cfg.Redact(applyErr.Error()))
	return true, m.post(ctx, bot, mb, fmt.Sprintf("set-aside-%d", g.last.ID), "set_aside", body)
}

type eventGroup struct {
	ids  []int64
	last StoredEvent
}

// foldEvents folds consecutive label (or assignee) events of one target into one: Forgejo
// sends the whole list each time, so only the last list counts; GitLab's previous list is
// taken from the first event of the run. A labels event that carries an assignee change too
// (assigneesChanged) keeps the first previous assignees of the run, and its assignees are the
// last known. The reviews asked along (GitLab: one delivery for a label change and a reviewer
// added) are those of every event of the run.
func foldEvents(evs []StoredEvent) []eventGroup {
	var out []eventGroup
	for _, e := range evs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			p, c := prev.last.Event, e.Event
			if (c.Type == forge.EventLabels || c.Type == forge.EventAssignees) && p.Type == c.Type &&
				p.Target == c.Target && strings.EqualFold(p.Sender.Login, c.Sender.Login) {
				merged := e
				if c.Type == forge.EventLabels && p.PreviousLabels != nil {
					merged.Event.PreviousLabels = p.PreviousLabels
				}
				if c.Type == forge.EventAssignees && p.PreviousAssignees != nil {
					merged.Event.PreviousAssignees = p.PreviousAssignees
				}
				if c.Type == forge.EventLabels && p.PreviousAssignees != nil {
					// The first assignee change of the run, to the last assignees known.
					merged.Event.PreviousAssignees = p.PreviousAssignees
					if !c.AssigneesKnown {
						merged.Event.AssigneesKnown, merged.Event.Assignees = p.AssigneesKnown, p.Assignees
					}
				}
				for _, r := range p.ReviewRequested { // a review asked in the same change stays asked
					if !containsFold(merged.Event.ReviewRequested, r) {
						merged.Event.ReviewRequested = append(slices.Clone(merged.Event.ReviewRequested), r)
					}
				}
				prev.ids = append(prev.ids, e.ID)
				prev.last = merged
				continue
			}
		}
		out = append(out, eventGroup{ids: []int64{e.ID}, last: e})
	}
	return out
}

// origin is who sent an event and what it is about, as the machine sees it.
type origin struct {
	fromBot, otherBot bool // sent by this bot; by another bot
	onIssue, onOurMR  bool // about the mailbox's issue; about the bot's merge request
}

func originOf(ev forge.Event, bot Bot, mb *Mailbox) origin {
	o := origin{
		fromBot:  strings.EqualFold(ev.Sender.Login, bot.Login),
		otherBot: otherBot(ev.Kind, ev.Sender, bot),
		onIssue:  !ev.Target.MergeRequest && ev.Target.Number == mb.Number && !mb.MergeRequest,
		onOurMR:  ev.Target.MergeRequest && mb.MRNumber != 0 && ev.Target.Number == mb.MRNumber,
	}
	// The branch tells an event that names no number (0) about the bot's merge request; a
	// merge request of the same branch name with another number is someone else's (a fork's).
	if ev.MergeRequest != nil && !ev.MergeRequest.FromFork && mb.Branch != "" && ev.MergeRequest.SourceBranch == mb.Branch &&
		!mb.MergeRequest && mb.MRNumber != 0 && (ev.MergeRequest.Number == 0 || ev.MergeRequest.Number == mb.MRNumber) {
		o.onOurMR = true
	}
	return o
}

// otherBot reports whether u is a bot other than Alfred's own account: marked so at the edge
// (the forge's flag), configured (Bot.OtherBots), or by its name or id (forge.IsBotLogin), which
// an event the reconciliation, the poll or the rebuild derived never had checked.
func otherBot(kind forge.Kind, u forge.User, bot Bot) bool {
	if strings.EqualFold(u.Login, bot.Login) {
		return false
	}
	return u.Bot || containsFold(bot.OtherBots, u.Login) || forge.IsBotLogin(kind, u.ID, u.Login)
}

// handle applies one event to the mailbox and returns a short outcome for the events table.
func (m *Machine) handle(ctx context.Context, bot Bot, mb *Mailbox, se StoredEvent) (string, error) {
	ev := se.Event
	o := originOf(ev, bot, mb)
	if o.onIssue {
		mb.Title = cmp.Or(ev.Title, mb.Title)
		mb.Author = cmp.Or(mb.Author, ev.Author.Login)
	}
	if mb.MergeRequest {
		return m.foreignMR(ctx, bot, mb, se, o)
	}
	// The merge gate is evaluated again on every approval, push and status change: a human's
	// event on the bot's merge request, and a pipeline of its head whoever started it (the
	// bot's own push starts one).
	if (o.onOurMR && !o.fromBot) || (ev.Type == forge.EventPipeline && ofHead(ev.Pipeline, mb)) {
		m.autoMergeRecheck(mb)
	}
	switch ev.Type {
	case forge.EventIssueOpened, forge.EventAssignees:
		return m.assignees(ctx, bot, mb, se, o)
	case forge.EventLabels:
		outcome, err := m.labelEvent(ctx, bot, mb, se, o)
		if err != nil || !assigneesChanged(ev) {
			return outcome, err
		}
		// One delivery that changed the labels and the assignees (GitLab's quick actions
		// "/label ~x /assign @bot" in one comment): the assignees next, with the labels known.
		also, err := m.assignees(ctx, bot, mb, se, o)
		return outcome + "; " + also, err
	case forge.EventComment, forge.EventCommentEdited:
		switch {
		case o.fromBot:
			return "own comment", nil
		case o.otherBot:
			return "ignored: comment by another bot", nil
		case o.onOurMR && ev.Type == forge.EventComment && ev.Comment != nil && mb.State.Working():
			return m.reviewEvent(ctx, bot, mb, se)
		case !o.onIssue || ev.Comment == nil:
			return "comment recorded", nil
		}
		return m.comment(ctx, bot, mb, ev, se.ID)
	case forge.EventIssueClosed:
		if !o.onIssue || !mb.State.Working() {
			return "closed: nothing running", nil
		}
		return m.done(ctx, bot, mb, onIssueClosed, "the issue was closed")
	case forge.EventIssueEdited:
		return "title and description recorded", nil
	case forge.EventMergeRequestMerged, forge.EventMergeRequestClosed:
		if !o.onOurMR || !mb.State.Working() {
			return "ignored: not Alfred's merge request", nil
		}
		if ev.Type == forge.EventMergeRequestMerged {
			return m.done(ctx, bot, mb, onMerged, "the merge request was merged")
		}
		return m.cancel(ctx, mb, onMRClosed, "the merge request was closed without merge")
	case forge.EventMergeRequestOpened, forge.EventMergeRequestUpdated:
		if o.onOurMR && ev.MergeRequest != nil && ev.MergeRequest.HeadSHA != "" && mb.MRNumber != 0 {
			if staleHead(mb, ev, ev.MergeRequest.HeadSHA) {
				// Sent before Alfred's push: the head it names is no longer the head.
				return fmt.Sprintf("ignored: head %s is older than the head %s Alfred pushed", short(ev.MergeRequest.HeadSHA), short(mb.HeadSHA)), nil
			}
			mb.HeadSHA = ev.MergeRequest.HeadSHA
		}
		if o.onOurMR && ev.Kind == forge.KindGitLab {
			return m.mergeStatusEvent(mb, ev), nil
		}
		return "merge request recorded", nil
	case forge.EventMergeStatus:
		if !o.onOurMR {
			return "ignored: not Alfred's merge request", nil
		}
		return m.mergeStatusEvent(mb, ev), nil
	case forge.EventReview:
		switch {
		case !o.onOurMR:
			return "review recorded", nil
		case o.fromBot, o.otherBot:
			return "ignored: review by a bot", nil
		case !mb.State.Working():
			return "review recorded", nil
		}
		return m.reviewEvent(ctx, bot, mb, se)
	case forge.EventPipeline:
		if !def(mb.State).accepts(inputCI) {
			return "pipeline recorded", nil
		}
		if ev.Pipeline != nil && ev.Pipeline.SHA != "" && !ofHead(ev.Pipeline, mb) {
			return fmt.Sprintf("ignored: pipeline of %s, no longer the head (%s)", short(ev.Pipeline.SHA), short(mb.HeadSHA)), nil
		}
		return m.checkCI(ctx, bot, mb)
	}
	return "recorded", nil
}

// ofHead reports whether pipeline p may be about the mailbox's head commit: it ran on the head
// itself, or it is a merge request pipeline of the mailbox's merge request that does not say
// which head it ran for (merged results: its sha is a merge commit of a head into the target;
// forge.Pipeline.ForMergeRequest), whose head checkCI then reads from the forge.
func ofHead(p *forge.Pipeline, mb *Mailbox) bool {
	if p == nil || mb.HeadSHA == "" {
		return false
	}
	return p.SHA == mb.HeadSHA || p.ForMergeRequest(mb.MRNumber)
}

// assigneesChanged reports whether ev, of another type, also carries a change of the
// assignees (forge.Event.PreviousAssignees and Assignees differ).
func assigneesChanged(ev forge.Event) bool {
	if !ev.AssigneesKnown || ev.PreviousAssignees == nil {
		return false
	}
	added, removed := diff(ev.PreviousAssignees, ev.Assignees)
	return len(added)+len(removed) > 0
}

// assignees handles an issue opened or its assignees changed: the bot assigned starts the
// lifecycle, the bot unassigned cancels it.
func (m *Machine) assignees(ctx context.Context, bot Bot, mb *Mailbox, se StoredEvent, o origin) (string, error) {
	ev := se.Event
	if !o.onIssue {
		return "ignored: assignees of a merge request", nil
	}
	prev := []string(mb.Assignees)
	if ev.PreviousAssignees != nil {
		prev = ev.PreviousAssignees
	}
	if ev.Type == forge.EventIssueOpened && ev.LabelsKnown {
		mb.Labels = ev.Labels
	}
	if !ev.AssigneesKnown {
		return "no assignee information", nil
	}
	if o.fromBot {
		return "own change", nil
	}
	added, removed := diff(prev, ev.Assignees)
	mb.Assignees = ev.Assignees
	if containsFold(added, bot.Login) {
		if o.otherBot {
			return "ignored: assigned by another bot", nil
		}
		return m.start(ctx, bot, mb, ev.Sender.Login, se.ID, ev.Action == derivedAction)
	}
	if mb.State.Working() && (containsFold(removed, bot.Login) || !containsFold(ev.Assignees, bot.Login)) {
		if d, err := m.authorize(ctx, bot, mb, gate.Unassign, ev.Sender.Login); err != nil {
			return "", err
		} else if d != gate.Allowed {
			// Undone: the bot assigns itself again and goes on.
			if err := bot.Forge.SetAssignees(ctx, mb.Ref(), []string{bot.Login}, nil); err != nil {
				return "", fmt.Errorf("assign the bot again: %w", err)
			}
			mb.Assignees = append(mb.Assignees, bot.Login)
			return m.refuseAs(ctx, bot, mb, "refused-unassign-"+strings.ToLower(ev.Sender.Login), ev.Sender.Login, "unassign me")
		}
		return m.cancel(ctx, mb, onUnassigned, "the bot was unassigned by @"+ev.Sender.Login)
	}
	return "assignees recorded", nil
}

// labelEvent handles a change of the issue's labels by a human.
func (m *Machine) labelEvent(ctx context.Context, bot Bot, mb *Mailbox, se StoredEvent, o origin) (string, error) {
	ev := se.Event
	if !o.onIssue {
		return "ignored: labels of a merge request", nil
	}
	if o.fromBot || !ev.LabelsKnown {
		return "own change", nil
	}
	derived := ev.Action == derivedAction && ev.PreviousLabels != nil
	if o.otherBot && derived {
		// Another bot's change the history shows: acted on by nobody, and not written into the
		// mailbox's labels either, where it could hide a human's delivery of the same label;
		// what it added that would steer or set state is kept aside as a delivered change's is.
		added, removed := diff(ev.PreviousLabels, ev.Labels)
		m.ignoreBotLabels(mb, added, removed)
		return "labels recorded: changed by another bot", nil
	}
	prev := []string(mb.Labels)
	if ev.PreviousLabels != nil {
		prev = ev.PreviousLabels
	}
	added, removed := diff(prev, ev.Labels)
	var approved map[string]string // labels of the change someone allowed made, by whom (othersLabels)
	// A whole list as delivered (a derived change carries its PreviousLabels).
	if ev.PreviousLabels == nil && !o.otherBot {
		var err error
		if added, removed, ev.Labels, approved, err = m.sendersChange(ctx, bot, mb, ev, added, removed); err != nil {
			return "", err
		}
	}
	if derived {
		// A derived change is one person's among others' (Derived.labels): their difference
		// alone applies; the lists carry what the others did, judged in their own events.
		mb.Labels = slices.DeleteFunc(slices.Clone(mb.Labels), func(l string) bool { return containsFold(removed, l) })
		for _, l := range added {
			if !containsFold(mb.Labels, l) {
				mb.Labels = append(mb.Labels, l)
			}
		}
	} else {
		mb.Labels = ev.Labels
	}
	m.forgetAutoMergeBy(mb)
	if o.otherBot {
		m.ignoreBotLabels(mb, added, removed)
		return "labels recorded: changed by another bot", nil
	}
	// Every label of the change passes the gate on its own, in every state.
	added, removed, note, err := m.gateLabels(ctx, bot, mb, ev.Sender.Login, added, removed, approved)
	if err != nil {
		return "", err
	}
	if note != "" {
		out, err := m.labelsChangedBy(ctx, bot, mb, se, added, removed, approved)
		return note + out, err
	}
	return m.labelsChangedBy(ctx, bot, mb, se, added, removed, approved)
}

// sendersChange keeps, of a change delivered as the whole list the sender left (Forgejo,
// Gitea: no previous labels), only what is the sender's to act on: a steering or state label
// the label history shows someone else adding or removing and the gate would not allow them
// is left out of added or removed and out of the mailbox's view (labels), for that person's
// own event; one it would allow them is in approved, with who made it (othersLabels).
func (m *Machine) sendersChange(ctx context.Context, bot Bot, mb *Mailbox, ev forge.Event, added, removed []string) (keepAdded, keepRemoved, labels []string, approved map[string]string, err error) {
	othersAdded, othersRemoved, approved, err := m.othersLabels(ctx, bot, mb, ev.Sender.Login, ev.OccurredAt, added, removed)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	labels = slices.DeleteFunc(slices.Clone(ev.Labels), func(l string) bool { return containsFold(othersAdded, l) })
	labels = append(labels, othersRemoved...)
	added = slices.DeleteFunc(added, func(l string) bool { return containsFold(othersAdded, l) })
	removed = slices.DeleteFunc(removed, func(l string) bool { return containsFold(othersRemoved, l) })
	return added, removed, labels, approved, nil
}

// ignoreBotLabels keeps aside (Data.IgnoredLabels) what another bot added that would steer or
// set state: a bot never validates a plan, starts a phase or sets the type, so nothing takes
// such a label later either (the type at the assignment, auto-merge at the merge). What it
// removed leaves the list.
func (m *Machine) ignoreBotLabels(mb *Mailbox, added, removed []string) {
	for _, l := range added {
		if (m.steering(l) || m.stateLabel(l)) && !containsFold(mb.Data.IgnoredLabels, l) {
			mb.Data.IgnoredLabels = append(mb.Data.IgnoredLabels, l)
		}
	}
	mb.Data.IgnoredLabels = slices.DeleteFunc(mb.Data.IgnoredLabels, func(x string) bool { return containsFold(removed, x) })
}

// labelsChangedBy acts on the labels of a change that passed the gate.
func (m *Machine) labelsChangedBy(ctx context.Context, bot Bot, mb *Mailbox, se StoredEvent, added, removed []string, by map[string]string) (string, error) {
	ev := se.Event
	if mb.Data.UntilGreen && containsFold(removed, m.cfg.Labels.RetryUntilGreen) {
		// The label went: so does what it asked for. The next failure meets the usual bound.
		mb.Data.UntilGreen, mb.Data.UntilGreenRuns = false, 0
	}
	if mb.State == StateBlocked && containsFold(removed, m.cfg.Labels.Blocked) && !containsFold(added, m.cfg.Labels.Blocked) {
		who := cmp.Or(by[strings.ToLower(m.cfg.Labels.Blocked)], ev.Sender.Login)
		return m.resume(ctx, bot, mb, who, se.ID, false,
			fmt.Sprintf("Resuming where I stopped, as @%s removed `%s`.", who, m.cfg.Labels.Blocked))
	}
	return m.labelsAdded(ctx, bot, mb, added, ev.Sender.Login, se.ID, by)
}

// labelsAdded reacts to labels a human added, as far as the state accepts them, each as the
// change of sender, or of the person by names for it (a label of a whole list that person
// made, othersLabels). Each label of
// the change acts on its own, in a fixed order whatever the order the forge listed them in: the
// type first, then auto-merge, the retries, the plan's validation, and status::blocked last, so
// that a hold added with another label holds what that label started instead of being lost.
func (m *Machine) labelsAdded(ctx context.Context, bot Bot, mb *Mailbox, added []string, sender string, eventID int64, by map[string]string) (string, error) {
	if !mb.State.Working() {
		return "labels recorded", nil
	}
	order := slices.Clone(added)
	slices.SortStableFunc(order, func(a, b string) int { return m.labelRank(a) - m.labelRank(b) })
	var outs []string
	for _, l := range order {
		if !mb.State.Working() {
			break
		}
		out, err := m.labelAdded(ctx, bot, mb, l, cmp.Or(by[strings.ToLower(l)], sender), eventID)
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	if len(outs) == 0 {
		return "labels recorded", nil
	}
	return strings.Join(outs, "; "), nil
}

// labelRank orders the labels of one change for labelsAdded.
func (m *Machine) labelRank(l string) int {
	c := m.cfg.Labels
	switch {
	case c.TypeOf(l) != "":
		return 0
	case strings.EqualFold(l, c.AutoMerge):
		return 1
	case strings.EqualFold(l, c.RetryOnce), strings.EqualFold(l, c.Retry), strings.EqualFold(l, c.RetryUntilGreen):
		return 2
	case strings.EqualFold(l, c.ValidatePlan):
		return 3
	case strings.EqualFold(l, c.Blocked):
		return 4
	}
	return 5
}

// labelAdded reacts to one label a human added, in the state as it is now; "" when the label
// means nothing there.
func (m *Machine) labelAdded(ctx context.Context, bot Bot, mb *Mailbox, l, sender string, eventID int64) (string, error) {
	switch {
	case strings.EqualFold(l, m.cfg.Labels.ValidatePlan):
		return m.validate(ctx, bot, mb, sender, eventID)
	case strings.EqualFold(l, m.cfg.Labels.RetryOnce):
		return m.retryOnce(ctx, bot, mb, sender, eventID)
	case m.cfg.Labels.TypeOf(l) != "" && def(mb.State).accepts(inputTypeLabel):
		return m.typeLabel(ctx, bot, mb, m.cfg.Labels.TypeOf(l), sender, eventID)
	case strings.EqualFold(l, m.cfg.Labels.Retry), strings.EqualFold(l, m.cfg.Labels.RetryUntilGreen):
		return m.retryLabel(ctx, bot, mb, l, sender, eventID)
	case strings.EqualFold(l, m.cfg.Labels.AutoMerge):
		return m.autoMergeLabel(ctx, bot, mb, sender, eventID)
	case strings.EqualFold(l, m.cfg.Labels.Blocked) && mb.State != StateBlocked:
		to, err := next(mb.State, onBlockedLabel)
		if err != nil {
			return "", err
		}
		from := mb.State
		mb.Data.BlockedFrom, mb.Data.Blocked = from, "blocked by @"+sender
		// The human set the blocked label already; the other status label goes.
		if err := m.setState(ctx, bot, mb, to); err != nil {
			return "", err
		}
		body := fmt.Sprintf("I stopped, as @%s added `%s`. I keep what I did so far and my session: remove the label, or add `%s`, to resume where I stopped.",
			sender, m.cfg.Labels.Blocked, m.cfg.Labels.Retry)
		if def(from).Phase == "" {
			body = fmt.Sprintf("I am holding, as @%s added `%s`. Remove the label, or add `%s`, to resume.",
				sender, m.cfg.Labels.Blocked, m.cfg.Labels.Retry)
		}
		if err := m.post(ctx, bot, mb, fmt.Sprintf("held-%d", eventID), "held", body); err != nil {
			return "", err
		}
		return "blocked by a human", nil
	}
	return "", nil
}

// validate handles ai::validate_plan: the label is removed whoever set it, and a writer's
// validation starts the development when the state accepts it.
func (m *Machine) validate(ctx context.Context, bot Bot, mb *Mailbox, sender string, eventID int64) (string, error) {
	if ok, refusal, err := m.oneShot(ctx, bot, mb, m.cfg.Labels.ValidatePlan, sender, eventID, "validate the plan"); !ok {
		return refusal, err
	}
	if !def(mb.State).accepts(inputValidation) {
		return "ignored: no plan is waiting for validation", nil
	}
	mb.Data.ValidatedBy = sender
	body := fmt.Sprintf("Plan validated by @%s. Starting the development.", sender)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("validated-%d", mb.Data.Round), "validated", body); err != nil {
		return "", err
	}
	return "plan validated", m.follow(ctx, bot, mb, onValidated)
}

// comment handles a human comment (or an edit of one, including ticks in Alfred's own
// question block, which the forge reports as an edit by the human) as the state accepts it:
// answers to the open questions, or a retry.
func (m *Machine) comment(ctx context.Context, bot Bot, mb *Mailbox, ev forge.Event, eventID int64) (string, error) {
	d := def(mb.State)
	retry := d.accepts(inputRetry) && ev.Type == forge.EventComment && isRetry(ev.Comment.Body, bot.Login)
	if !d.accepts(inputAnswers) && !retry {
		return "comment recorded", nil
	}
	// A comment acts once, whether it came as a delivery, from reconciliation or both. It is
	// claimed only where it acts, so one recorded in a state that did not take it can act when
	// it comes again.
	if ev.Type == forge.EventComment && ev.Comment.ID != 0 {
		mine, err := m.store.ApplyComment(ctx, mb.ID, ev.Comment.ID, eventID)
		if err != nil {
			return "", err
		}
		if !mine {
			return "comment already applied (it came twice: delivered and reconciled)", nil
		}
	}
	if retry {
		return m.retry(ctx, bot, mb, ev.Sender.Login, eventID)
	}
	return m.answer(ctx, bot, mb, ev, eventID)
}

func isRetry(body, login string) bool {
	b := strings.ToLower(strings.TrimSpace(body))
	b = strings.TrimSpace(strings.TrimPrefix(b, "@"+strings.ToLower(login)))
	return b == "retry" || b == "/retry" || b == "retry please" || b == "please retry"
}

// refuseAs posts that login may not do what they tried, as the comment key: a key already
// posted is not posted again (an unchanged text is not even edited), so a key that names a login and a round
// answers that login once in the round however often they try.
func (m *Machine) refuseAs(ctx context.Context, bot Bot, mb *Mailbox, key, login, what string) (string, error) {
	body := fmt.Sprintf("@%s, only a project member with write access can %s, so I am leaving this as it is.", login, what)
	if err := m.post(ctx, bot, mb, key, "refused", body); err != nil {
		return "", err
	}
	return "refused: @" + login + " has no write access", nil
}

// cancels reports whether ev ends the mailbox's work or holds it (blocked names the blocked
// label), so a running container is stopped.
func cancels(ev forge.Event, bot Bot, mb *Mailbox, blocked string) bool {
	ok, _ := cancelInput(ev, bot, mb, blocked)
	return ok
}

// cancelInput reports whether ev cancels (cancels) and the kinds of human input it is to the
// gate (cancelAllowed), any one of which the gate must allow: an unassignment of the bot
// (gate.Unassign), status::blocked added (gate.SteerLabel); none for a close of the issue or
// the merge request, the forge's to allow.
func cancelInput(ev forge.Event, bot Bot, mb *Mailbox, blocked string) (bool, []gate.Kind) {
	byBot := strings.EqualFold(ev.Sender.Login, bot.Login)
	switch ev.Type {
	case forge.EventIssueClosed:
		return !ev.Target.MergeRequest, nil
	case forge.EventMergeRequestClosed, forge.EventMergeRequestMerged:
		return ev.Target.MergeRequest && ev.Target.Number == mb.MRNumber, nil
	case forge.EventAssignees:
		ok := !ev.Target.MergeRequest && ev.AssigneesKnown && !containsFold(ev.Assignees, bot.Login) && !byBot
		return ok, []gate.Kind{gate.Unassign}
	case forge.EventLabels:
		if ev.Target.MergeRequest || byBot {
			return false, nil
		}
		// A human adding the blocked label stops the run (the session is kept); so does one
		// update that also unassigned the bot (GitLab: "/unassign @bot /label ~x").
		var kinds []gate.Kind
		if assigneesChanged(ev) && !containsFold(ev.Assignees, bot.Login) && containsFold(ev.PreviousAssignees, bot.Login) {
			kinds = append(kinds, gate.Unassign)
		}
		if ev.LabelsKnown && containsFold(ev.Labels, blocked) && !containsFold(mb.Labels, blocked) {
			kinds = append(kinds, gate.SteerLabel)
		}
		return len(kinds) > 0, kinds
	}
	return false, nil
}
