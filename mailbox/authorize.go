package mailbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// gateState is the state of mb as the authorization gate tells states apart.
func gateState(s State) gate.State {
	switch {
	case s == StateBlocked:
		return gate.Blocked
	case s.Working():
		return gate.Working
	}
	return gate.Idle
}

// role returns login's role in repo as the forge reports it, cached for PermissionTTL (a
// demoted person loses their power within that bound; DropPermissions forgets sooner).
func (m *Machine) role(ctx context.Context, bot Bot, repo, login string) (forge.Role, error) {
	key := repo + "\x00" + strings.ToLower(login)
	m.known.mu.Lock()
	e, ok := m.known.perms[key]
	m.known.mu.Unlock()
	if ok && m.now().Before(e.exp) {
		return e.role, nil
	}
	r, err := bot.Forge.Role(ctx, repo, login)
	if err != nil {
		return forge.RoleNone, fmt.Errorf("check permission of %s: %w", login, err)
	}
	m.known.mu.Lock()
	m.known.perms[key] = permEntry{role: r, exp: m.now().Add(m.cfg.PermissionTTL)}
	m.known.mu.Unlock()
	return r, nil
}

// DropPermissions forgets the cached roles of repo ("" forgets every repository's): the forge
// reported a change of its members.
func (m *Machine) DropPermissions(repo string) {
	m.known.mu.Lock()
	defer m.known.mu.Unlock()
	for k := range m.known.perms {
		if repo == "" || strings.HasPrefix(k, repo+"\x00") {
			delete(m.known.perms, k)
		}
	}
}

// authorize passes one input of login through the gate (mailbox/gate) in mb's state. An input
// that is not allowed is counted (Config.Refused) and logged; the caller says a refusal.
func (m *Machine) authorize(ctx context.Context, bot Bot, mb *Mailbox, kind gate.Kind, login string) (gate.Decision, error) {
	d, r, err := m.decide(ctx, bot, mb, kind, login)
	if err != nil || d == gate.Allowed {
		return d, err
	}
	reason := gate.Reason(m.cfg.Needs, kind)
	m.log.Info("input not allowed", "mailbox_id", mb.ID, "kind", kind, "login", login, "role", r.String(),
		"state", mb.State, "decision", d, "reason", reason)
	if m.cfg.Refused != nil {
		m.cfg.Refused(string(kind), reason)
	}
	return d, nil
}

// decide is the gate's decision on one input of login in mb's state, and login's role
// (RoleNone when the kind needs none and no role was read), with nothing said, logged or
// counted: authorize's, or a look ahead of the event's own pass (cancelAllowed).
func (m *Machine) decide(ctx context.Context, bot Bot, mb *Mailbox, kind gate.Kind, login string) (gate.Decision, forge.Role, error) {
	if m.cfg.Needs.Need(kind) == forge.RoleNone {
		return gate.Allowed, forge.RoleNone, nil // no role to read
	}
	r, err := m.role(ctx, bot, mb.Repo, login)
	if err != nil {
		return gate.Ignored, r, err
	}
	author := mb.Author
	if author == "" && r < m.cfg.Needs.Need(kind) && (kind == gate.Answer || kind == gate.StateLabel) {
		// Before the assignment the mailbox does not know who wrote the issue: the forge does.
		is, err := bot.Forge.Issue(ctx, mb.Ref())
		if err != nil {
			return gate.Ignored, r, fmt.Errorf("read the author of the issue: %w", err)
		}
		author = is.Author.Login
	}
	in := gate.Input{Kind: kind, State: gateState(mb.State), Role: r, Author: author != "" && strings.EqualFold(login, author)}
	return gate.Decide(m.cfg.Needs, in), r, nil
}

// cancelAllowed reports whether the gate allows the input of ev that cancels mb's run
// (cancelInput gives its kinds; none: a close, the forge's to allow); another bot's labels,
// which the pass records and acts on none of, are not allowed. The run's watch asks it before
// it stops the run, so that an input the event's pass will refuse stops nothing.
func (m *Machine) cancelAllowed(ctx context.Context, bot Bot, mb *Mailbox, ev forge.Event) (bool, error) {
	_, kinds := cancelInput(ev, bot, mb, m.cfg.Labels.Blocked)
	if len(kinds) == 0 {
		return true, nil
	}
	if ev.Type == forge.EventLabels && otherBot(ev.Kind, ev.Sender, bot) {
		return false, nil
	}
	for _, k := range kinds {
		d, _, err := m.decide(ctx, bot, mb, k, ev.Sender.Login)
		if err != nil || d == gate.Allowed {
			return err == nil, err
		}
	}
	return false, nil
}

// canWrite reports whether login may steer (the role SteerLabel needs).
func (m *Machine) canWrite(ctx context.Context, bot Bot, repo, login string) (bool, error) {
	return m.hasRole(ctx, bot, repo, login, gate.SteerLabel)
}

// hasRole reports whether login has the role the input kind needs (permissions.<kind>).
func (m *Machine) hasRole(ctx context.Context, bot Bot, repo, login string, kind gate.Kind) (bool, error) {
	r, err := m.role(ctx, bot, repo, login)
	if err != nil {
		return false, err
	}
	return r >= m.cfg.Needs.Need(kind), nil
}

// steering reports whether label steers Alfred (gate.SteerLabel).
func (m *Machine) steering(label string) bool {
	l := m.cfg.Labels
	return containsFold([]string{l.ValidatePlan, l.Retry, l.RetryOnce, l.RetryUntilGreen, l.AutoMerge, l.Blocked}, label)
}

// stateLabel reports whether label is a status or type label (gate.StateLabel).
func (m *Machine) stateLabel(label string) bool {
	return containsFold(m.cfg.Labels.statuses(), label) || m.cfg.Labels.TypeOf(label) != ""
}

// gateLabels passes each label of one change through the gate, in every state: a steering
// label added (or status::blocked removed) by someone without the role it needs is undone on
// the forge and said once per person and issue; a state label they added is not taken. It
// returns the added and removed labels that may act, and what it did not allow, for the
// event's outcome ("" when it allowed everything).
func (m *Machine) gateLabels(ctx context.Context, bot Bot, mb *Mailbox, sender string, added, removed []string, approved map[string]string) (keepAdded, keepRemoved []string, note string, err error) {
	var keep, undoAdd, undoRemove, ignored []string
	for _, l := range added {
		if _, ok := approved[strings.ToLower(l)]; ok {
			keep = append(keep, l) // someone allowed made this change (othersLabels)
			continue
		}
		kind := gate.Kind("")
		switch {
		case m.steering(l):
			kind = gate.SteerLabel
		case m.stateLabel(l):
			kind = gate.StateLabel
		}
		if kind == "" {
			keep = append(keep, l)
			continue
		}
		d, err := m.authorize(ctx, bot, mb, kind, sender)
		if err != nil {
			return nil, nil, "", err
		}
		switch d {
		case gate.Allowed:
			keep = append(keep, l)
			mb.Data.IgnoredLabels = slices.DeleteFunc(mb.Data.IgnoredLabels, func(x string) bool { return strings.EqualFold(x, l) })
		case gate.Refused:
			undoAdd = append(undoAdd, l)
		default:
			ignored = append(ignored, l)
			if !containsFold(mb.Data.IgnoredLabels, l) {
				mb.Data.IgnoredLabels = append(mb.Data.IgnoredLabels, l)
			}
		}
	}
	// A scoped label added replaces the label of its scope on both forges (GitLab's scoped
	// labels, Gitea's exclusive ones) in the same change: undoing the add restores it too.
	undoneScopes := map[string]bool{}
	for _, l := range undoAdd {
		if sc := labelScope(l); sc != "" {
			undoneScopes[sc] = true
		}
	}
	var restore []string // put back with the undone add of their scope, not refused themselves
	for _, l := range removed {
		mb.Data.IgnoredLabels = slices.DeleteFunc(mb.Data.IgnoredLabels, func(x string) bool { return strings.EqualFold(x, l) })
		if sc := labelScope(l); sc != "" && undoneScopes[sc] {
			restore = append(restore, l)
			continue
		}
		if _, ok := approved[strings.ToLower(l)]; ok || !strings.EqualFold(l, m.cfg.Labels.Blocked) || mb.State != StateBlocked {
			keepRemoved = append(keepRemoved, l)
			continue
		}
		d, err := m.authorize(ctx, bot, mb, gate.SteerLabel, sender)
		if err != nil {
			return nil, nil, "", err
		}
		if d == gate.Allowed {
			keepRemoved = append(keepRemoved, l)
		} else {
			undoRemove = append(undoRemove, l)
		}
	}
	if len(ignored) > 0 {
		note = fmt.Sprintf("ignored for @%s (%s): %s; ", sender, gate.Reason(m.cfg.Needs, gate.StateLabel), strings.Join(ignored, ", "))
	}
	if len(undoAdd)+len(undoRemove) == 0 {
		return keep, keepRemoved, note, nil
	}
	if err := bot.Forge.SetLabels(ctx, mb.Ref(), append(slices.Clone(undoRemove), restore...), undoAdd); err != nil {
		return nil, nil, "", fmt.Errorf("undo the labels of @%s: %w", sender, err)
	}
	mb.Labels = slices.DeleteFunc(mb.Labels, func(l string) bool { return containsFold(undoAdd, l) })
	for _, l := range append(slices.Clone(undoRemove), restore...) {
		if !containsFold(mb.Labels, l) {
			mb.Labels = append(mb.Labels, l)
		}
	}
	var whats []string
	for _, l := range undoAdd {
		if w := m.labelWhat(l, true); !slices.Contains(whats, w) {
			whats = append(whats, w)
		}
	}
	for _, l := range undoRemove {
		if w := m.labelWhat(l, false); !slices.Contains(whats, w) {
			whats = append(whats, w)
		}
	}
	what := strings.Join(whats, " or ")
	key := "refused-labels-" + strings.ToLower(sender)
	if _, err := m.refuseAs(ctx, bot, mb, key, sender, what); err != nil {
		return nil, nil, "", err
	}
	note += fmt.Sprintf("refused for @%s (%s): %s; ", sender, gate.Reason(m.cfg.Needs, gate.SteerLabel),
		strings.Join(append(undoAdd, undoRemove...), ", "))
	return keep, keepRemoved, note, nil
}

// othersLabels returns the steering and state labels of a change whose label history
// (Forge.Activity) shows someone other than sender last adding (of added) or removing (of
// removed) them: those the gate would not allow that person (othersAdded, othersRemoved), and
// those it would (approved: lower-cased label → that person, whose change it acts as, and
// which the sender's gate does not judge; set when the issue was created, or a lost delivery): a change delivered as the whole list the sender left (Forgejo and Gitea send
// no previous labels) carries another's labels the mailbox has not taken, one the gate refused
// and undid since, or one whose delivery was lost. They are not the sender's input: each is
// judged as its own author's (its own delivery, or reconciliation's derived event). A label
// the history does not show adding was set when the issue was created: the issue author's
// (read from the forge when the mailbox does not know the author). One the history shows the
// bot changing, or does not show removing, stays the sender's. The history is read only when
// such a label is in the change. A label the history shows another bot changing stays the
// sender's. The history is read up to at, when the forge said the change
// was made (forge.Event.OccurredAt; zero: all of it), so that a later change by someone else
// does not take the sender's own.
func (m *Machine) othersLabels(ctx context.Context, bot Bot, mb *Mailbox, sender string, at time.Time, added, removed []string) (othersAdded, othersRemoved []string, approved map[string]string, err error) {
	gated := func(l string) bool { return m.steering(l) || m.stateLabel(l) }
	// Of removals, the gate judges only status::blocked's (gateLabels): any other is the
	// sender's, whoever made it.
	blocked := func(l string) bool { return strings.EqualFold(l, m.cfg.Labels.Blocked) }
	if !slices.ContainsFunc(added, gated) && !slices.ContainsFunc(removed, blocked) {
		return nil, nil, nil, nil
	}
	acts, err := bot.Forge.Activity(ctx, mb.Ref(), time.Time{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the label history: %w", err)
	}
	author := mb.Author
	last := func(l string, kind forge.ActivityKind) (string, error) {
		actor, _ := lastLabelChange(acts, kind, l, at, sender)
		who := actor.Login
		if who == "" && kind == forge.ActivityLabelAdded {
			// A label the history does not show was set when the issue was created.
			if author == "" {
				is, err := bot.Forge.Issue(ctx, mb.Ref())
				if err != nil {
					return "", fmt.Errorf("read the issue's author: %w", err)
				}
				author = is.Author.Login
			}
			who = author
		}
		return who, nil
	}
	// Someone other than the sender and the bot made the change: the gate's decision is theirs.
	judge := func(l, who string) (other, allowed bool, err error) {
		if who == "" || strings.EqualFold(who, sender) || bot.IsBot(who) {
			// The sender's, the bot's own, or another bot's (whose own event kept it aside:
			// Data.IgnoredLabels), as a whole list always was.
			return false, false, nil
		}
		kind := gate.StateLabel
		if m.steering(l) {
			kind = gate.SteerLabel
		}
		d, _, err := m.decide(ctx, bot, mb, kind, who)
		return true, d == gate.Allowed, err
	}
	// Each judged change goes to approved (with who made it) or to others.
	place := func(l string, kind forge.ActivityKind, others *[]string) error {
		who, err := last(l, kind)
		if err != nil {
			return err
		}
		other, allowed, err := judge(l, who)
		switch {
		case err != nil:
			return err
		case other && allowed:
			if approved == nil {
				approved = map[string]string{}
			}
			approved[strings.ToLower(l)] = who
		case other:
			*others = append(*others, l)
		}
		return nil
	}
	for _, l := range added {
		if gated(l) {
			if err := place(l, forge.ActivityLabelAdded, &othersAdded); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	for _, l := range removed {
		if blocked(l) {
			if err := place(l, forge.ActivityLabelRemoved, &othersRemoved); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	return othersAdded, othersRemoved, approved, nil
}

// lastLabelChange returns who the label history acts shows last making the change kind to label
// l (case ignored), among the changes made at or before at (zero: all of them); of changes in
// the same second, prefer's when one is theirs, else the last listed. ok is false when the
// history shows none.
func lastLabelChange(acts []forge.Activity, kind forge.ActivityKind, l string, at time.Time, prefer string) (actor forge.User, ok bool) {
	var when time.Time
	isPrefer := func(u forge.User) bool { return prefer != "" && strings.EqualFold(u.Login, prefer) }
	for _, a := range acts {
		if a.Kind != kind || !strings.EqualFold(a.Label, l) || (!at.IsZero() && a.At.After(at)) {
			continue // another label, or a change made after at
		}
		if ok && a.At.Before(when) {
			continue // older than the change kept
		}
		if ok && a.At.Equal(when) && isPrefer(actor) && !isPrefer(a.Actor) {
			continue // the same second as prefer's change, kept
		}
		actor, when, ok = a.Actor, a.At, true // the last in the history's order
	}
	return actor, ok
}

// labelScope returns the scope of a scoped label ("status" of "status::blocked", the part
// before its last "::"), "" for a label without one.
func labelScope(l string) string {
	if i := strings.LastIndex(l, "::"); i > 0 {
		return strings.ToLower(l[:i])
	}
	return ""
}

// autoMergeEnabler returns who turned auto-merge on by the label: the writer recorded when the
// label was taken, else the last account the issue's label history shows adding it ("" when it
// shows none, or shows the bot: the bot never turns auto-merge on, so a label it added, by a
// GitLab quick action in a text it posted or by its token used by hand, names nobody; nor does
// another bot's, whatever its access).
func (m *Machine) autoMergeEnabler(ctx context.Context, bot Bot, mb *Mailbox) (string, error) {
	if mb.Data.AutoMergeBy != "" {
		return mb.Data.AutoMergeBy, nil
	}
	acts, err := bot.Forge.Activity(ctx, mb.Ref(), time.Time{})
	if err != nil {
		return "", fmt.Errorf("read the label history: %w", err)
	}
	by := ""
	for _, a := range acts {
		if strings.EqualFold(a.Label, m.cfg.Labels.AutoMerge) {
			switch a.Kind {
			case forge.ActivityLabelAdded:
				by = a.Actor.Login
				if strings.EqualFold(by, bot.Login) || otherBot(bot.Forge.Kind(), a.Actor, bot) {
					by = "" // nobody's: the bot's own, or another bot's whatever its access
				}
			case forge.ActivityLabelRemoved:
				by = ""
			}
		}
	}
	return by, nil
}

// labelWhat says what adding (or removing) a steering label asks, for a refusal.
func (m *Machine) labelWhat(label string, added bool) string {
	l := m.cfg.Labels
	switch {
	case !added:
		return "resume me by removing `" + label + "`"
	case strings.EqualFold(label, l.ValidatePlan):
		return "validate the plan"
	case strings.EqualFold(label, l.AutoMerge):
		return "turn auto-merge on"
	case strings.EqualFold(label, l.RetryOnce):
		return "allow one more run"
	case strings.EqualFold(label, l.Retry), strings.EqualFold(label, l.RetryUntilGreen):
		return "ask me to retry"
	case strings.EqualFold(label, l.Blocked):
		return "stop me with `" + label + "`"
	}
	return "add `" + label + "`"
}
