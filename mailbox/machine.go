package mailbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Config tunes the lifecycle. Zero values take the documented defaults.
type Config struct {
	// Labels names the labels Alfred reads and writes (DefaultLabels for empty names).
	Labels Labels
	// QuestionDeadline is how long a question block waits for a reply before the defaults
	// apply (default 24h).
	QuestionDeadline time.Duration
	// CIWait is how long Alfred waits for a pipeline to appear on the merge request before it
	// declares it ready for review without one (default 30m).
	CIWait time.Duration
	// CIPoll is how often CI state is read while in CI (default 30s). Forgejo sends no
	// webhook for commit statuses (see the forgejo-live fixture README), so polling is needed.
	CIPoll time.Duration
	// CIFixAttempts bounds the ci_fix runs per merge request (default 3).
	CIFixAttempts int
	// ReviewFixAttempts bounds the review_fix runs per merge request; 0 turns review_fix off
	// (no default: internal/config gives 5).
	ReviewFixAttempts int
	// RetryUntilGreenMax is the ceiling of ci_fix and review_fix runs under
	// ai::retry_until_green (default 10).
	RetryUntilGreenMax int
	// ReviewQuiet is how long after the last review event the comments go to a review_fix run
	// (default 30s): a review arrives as several deliveries (one GitLab note each).
	ReviewQuiet time.Duration
	// ReviewVerdicts lets a review of a merge request not the bot's approve or request changes
	// as the run concludes; off (the default), every review only comments.
	ReviewVerdicts bool
	// AutoMerge merges the bot's merge requests everywhere once green, approved and without
	// open thread (Settings overrides it per project; the AutoMerge label per issue);
	// MergeMethod is how (default forge.MergeCommit).
	AutoMerge   bool
	MergeMethod forge.MergeMethod
	// SelfReview configures the self_review phase (spec/lifecycle.md, "Self-review").
	SelfReview SelfReviewConfig
	// BranchPrefix starts every branch name (default "agent/").
	BranchPrefix string
	// FailureStreak is how many failed passes in a row (forge, database, Docker or git
	// unavailable) make Alfred say so in the issue (default 3); the comment is posted once per
	// streak.
	FailureStreak int
	// Redact censors secrets in every comment and merge request description posted (identity
	// when nil); cmd/alfred passes the configuration's internal/base/censor.Censor.
	Redact func(string) string
	// SessionResume reports whether runs of a repository continue one agent session per
	// mailbox (config sessions.agent_session_resume and its overrides); nil means on.
	SessionResume func(repo string) bool
	// Settings returns the settings a repository's organization or project overrides (config
	// scopes); nil applies the fields above everywhere. Empty fields take the fields above.
	Settings func(repo string) Settings
	// Usage reads the runs' tokens and cost for the status comment and the budget; nil posts
	// no status comment and applies no budget.
	Usage UsageReader
	// ShadowLog records what shadow mode does not do itself: a run that pushes, not started
	// (ShadowRun). cmd/alfred passes the store, which also backs the Shadow forge wrapper; nil
	// records nothing.
	ShadowLog ShadowLog
	// PoisonAttempts is how many times an event may fail to apply before it is set aside, and
	// how many claims of a mailbox may end without the pass finishing (the process died) before
	// the mailbox is blocked (default 5).
	PoisonAttempts int
	// Needs is the role each kind of human input needs (mailbox/gate; nil or a missing kind
	// takes gate.DefaultNeeds: writing steers).
	Needs gate.Needs
	// PermissionTTL is how long a role read from the forge is trusted (default 1m): a demoted
	// person loses their power within it.
	PermissionTTL time.Duration
	// MinApprovals is how many approvals of the merged head, by accounts with the role
	// gate.Approval needs other than the bot, auto-merge waits for; nil is 1 (0 only when set).
	MinApprovals *int
	// Refused counts an input the gate did not allow, by kind and reason (cmd/alfred passes
	// internal/metrics' alfred_refused_inputs_total); nil counts nothing.
	Refused func(kind, reason string)
}

func (c Config) withDefaults() Config {
	c.Labels = c.Labels.WithDefaults()
	c.QuestionDeadline = cmp.Or(c.QuestionDeadline, 24*time.Hour)
	c.CIWait = cmp.Or(c.CIWait, 30*time.Minute)
	c.CIPoll = cmp.Or(c.CIPoll, 30*time.Second)
	c.CIFixAttempts = cmp.Or(c.CIFixAttempts, 3)
	c.RetryUntilGreenMax = cmp.Or(c.RetryUntilGreenMax, 10)
	c.ReviewQuiet = cmp.Or(c.ReviewQuiet, 30*time.Second)
	c.BranchPrefix = cmp.Or(c.BranchPrefix, "agent/")
	c.MergeMethod = cmp.Or(c.MergeMethod, forge.MergeCommit)
	c.FailureStreak = cmp.Or(c.FailureStreak, 3)
	c.PoisonAttempts = cmp.Or(c.PoisonAttempts, 5)
	c.PermissionTTL = cmp.Or(c.PermissionTTL, time.Minute)
	if c.MinApprovals == nil {
		one := 1
		c.MinApprovals = &one
	}
	c.SelfReview.MaxRounds = cmp.Or(c.SelfReview.MaxRounds, 1)
	if c.Redact == nil {
		c.Redact = func(s string) string { return s }
	}
	return c
}

// Bot is one configured forge as the machine sees it.
type Bot struct {
	// Forge is the client of that forge.
	Forge forge.Forge
	// Login is the bot's user name on that forge.
	Login string
	// OtherBots are logins of other bots whose events and mentions never start work.
	OtherBots []string
}

// IsBot reports whether login is a bot's: the bot itself, one of OtherBots, or a forge's bot by
// its name (forge.IsBotLogin). cmd/alfred gives it to the post guard (PostGuard.IsBot), so that
// the machine's guarded text of a comment (Machine.post) is the one the forge receives.
func (b Bot) IsBot(login string) bool {
	return strings.EqualFold(login, b.Login) || containsFold(b.OtherBots, login) ||
		(b.Forge != nil && forge.IsBotLogin(b.Forge.Kind(), 0, login))
}

// Machine applies events and timers to mailboxes and starts the runs their states call for,
// reading what each state means from the lifecycle table (states.go).
type Machine struct {
	cfg   Config
	store Store
	bots  map[string]Bot
	jobs  JobRunner
	now   func() time.Time
	log   *slog.Logger

	// known is shared by the machine and its watched copies (watched).
	known *known
}

// known is what a machine remembers between passes: permissions read from the forge and the
// repositories whose labels exist.
type known struct {
	mu     sync.Mutex
	perms  map[string]permEntry
	labels map[string]bool // forge + repo whose labels exist
}

type permEntry struct {
	role forge.Role
	exp  time.Time
}

// NewMachine wires a machine. bots maps a configured forge name to its Bot; jobs runs the
// phases; now is the clock (nil: time.Now), the same one the store should read.
func NewMachine(cfg Config, store Store, bots map[string]Bot, jobs JobRunner, now func() time.Time, log *slog.Logger) *Machine {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Machine{cfg: cfg.withDefaults(), store: store, bots: bots, jobs: jobs, now: now, log: log,
		known: &known{perms: map[string]permEntry{}, labels: map[string]bool{}}}
}

// maxRounds bounds the rounds of one pass (events, timers, a run), so a mailbox that keeps
// moving yields its worker now and then.
const maxRounds = 20

// Advance makes one pass over a leased mailbox: it collects runs whose worker died, applies the
// pending events in arrival order (a burst of label or assignee changes is folded), fires due
// timers (question deadlines, CI polls), runs the phase the state calls for, and repeats until
// nothing is left to do. It returns an error only for failures worth a retry (forge or
// database unavailable); the events stay pending then.
func (m *Machine) Advance(ctx context.Context, mb *Mailbox) error { return m.advance(ctx, mb, nil) }

// RunSlots is what an event pass needs to know of the run workers (Workers implements it).
type RunSlots interface {
	// Idle returns how many run workers are idle; Limit how many there are.
	Idle() int
	Limit() int
}

// AdvanceEvents is Advance for an event worker: the same pass, but it stops where a run is due
// and leaves the run to a run worker (RunQueue.LeaseRun takes the mailbox, due at once). When
// every run worker is busy, the issue says it is queued and how many issues are ahead.
func (m *Machine) AdvanceEvents(ctx context.Context, mb *Mailbox, slots RunSlots) error {
	return m.advance(ctx, mb, slots)
}

// RunStates names the states whose row starts a run: the mailboxes a run worker takes.
func RunStates() []string { return statesWhere(func(d stateDef) bool { return d.Phase != "" }) }

// statesWhere names the states of the lifecycle table whose row meets cond, in its order.
func statesWhere(cond func(stateDef) bool) []string {
	var out []string
	for _, d := range lifecycle {
		if cond(d) {
			out = append(out, string(d.State))
		}
	}
	return out
}

// advance is Advance; with slots it stops before a run (AdvanceEvents).
func (m *Machine) advance(ctx context.Context, mb *Mailbox, slots RunSlots) error {
	log := m.log.With("mailbox_id", mb.ID, "forge", mb.Forge, "repo", mb.Repo, "issue", mb.Number)
	bot, ok := m.bots[mb.Forge]
	if !ok {
		return m.drain(ctx, mb, "no forge named "+mb.Forge+" is configured")
	}
	if crashed, err := m.crashLooping(ctx, bot, mb); crashed || err != nil {
		return err
	}
	// Runs left running by a stopped worker: reattach to a live container and collect its
	// outcome (applied by runPhase), or interrupt the run when nothing is left to collect.
	// An event pass does not wait for a container that still runs (a shutdown would stop it):
	// it leaves the mailbox, due, to a run worker, which reattaches to it.
	wait := slots == nil || def(mb.State).Phase == ""
	if running, err := m.recoverRuns(ctx, &bot, mb, wait); err != nil {
		log.Warn("recovery of unfinished runs failed", "err", err)
		return err
	} else if running {
		m.setWake(ctx, mb)
		if err := m.store.Save(ctx, mb); err != nil {
			return err
		}
		return errEventsHeld
	}
	if mb.Data.CancelledAttempt != 0 && def(mb.State).Phase != "" {
		// Start-up recovery found the run an operator cancelled while its process was down.
		if err := m.blockCancelled(ctx, bot, mb, 0, mb.Data.CancelledAttempt, ""); err != nil {
			return m.orClose(ctx, bot, mb, err)
		}
	}
	held := false
	for range maxRounds {
		progressed, heldNow, err := m.applyEventsHeld(ctx, bot, mb)
		if err != nil {
			return m.orClose(ctx, bot, mb, err)
		}
		held = heldNow
		if !mb.State.Working() {
			break
		}
		fired, err := m.timers(ctx, bot, mb)
		if err != nil {
			return m.orClose(ctx, bot, mb, err)
		}
		ran := false
		if parked, err := m.shadowPark(ctx, mb); parked || err != nil {
			if err != nil {
				return m.orClose(ctx, bot, mb, err)
			}
			break // shadow mode starts no run that pushes
		}
		if def(mb.State).Phase != "" && slots != nil {
			// A run worker takes it from here: it runs the phase, or acts on the outcome stored
			// for it (then nothing waits for a free slot).
			waiting, err := m.outcomeWaiting(ctx, mb)
			if err == nil && !waiting {
				err = m.queued(ctx, bot, mb, slots)
			}
			if err != nil {
				return m.orClose(ctx, bot, mb, err)
			}
			break
		}
		held = false // the run, or its stored outcome, is acted on now
		if def(mb.State).Phase != "" {
			if err := m.runPhase(ctx, bot, mb); errors.Is(err, errRunHeld) {
				break // the run waits, due, for a claim after the drain or the pause
			} else if err != nil {
				return m.orClose(ctx, bot, mb, err)
			}
			ran = true
			m.postProgress(ctx, bot, mb, "", time.Time{})
		}
		if !progressed && !fired && !ran {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if !mb.Data.FirstRunAt.IsZero() && !mb.MergeRequest {
		m.postProgress(ctx, bot, mb, "", time.Time{}) // done, blocked or waiting
	}
	// A recovered run the state no longer calls for is not applied later; the outcome of the run
	// it calls for is kept until a run pass acts on it, whatever this pass did (an event pass
	// stops before it).
	keepPhase, keepStep := "", ""
	if d := def(mb.State); d.Phase != "" && mb.State.Working() {
		keepPhase, keepStep = string(d.Phase), string(d.Step)
	}
	if err := m.store.DiscardUnapplied(ctx, mb, keepPhase, keepStep); err != nil {
		return err
	}
	m.setWake(ctx, mb)
	mb.Data.FailedPasses = 0
	if err := m.store.Save(ctx, mb); err != nil {
		return err
	}
	if held {
		return errEventsHeld
	}
	return nil
}

// queued says in the issue, once per round and state, that the run the state calls for waits
// for a run worker, when none is idle: "queued, 2 ahead".
func (m *Machine) queued(ctx context.Context, bot Bot, mb *Mailbox, slots RunSlots) error {
	if slots.Idle() > 0 {
		return nil
	}
	ids, err := m.store.QueuedRuns(ctx, RunStates())
	if err != nil {
		return err
	}
	ahead := len(slices.DeleteFunc(ids, func(id int64) bool { return id == mb.ID }))
	body := fmt.Sprintf("Queued, %d ahead: all %d agent run slots are busy with other issues. "+
		"The %s run starts as soon as one is free; I keep reacting to this issue meanwhile.",
		ahead, slots.Limit(), def(mb.State).runKey())
	return m.post(ctx, bot, mb, fmt.Sprintf("queued-%d-%s", mb.Data.Round, mb.State), "queued", body)
}

// crashLooping blocks a working mailbox whose last PoisonAttempts claims all ended without the
// pass releasing its lease: each of them stopped the process (a panic, the OOM killer), and
// trying again would only do it again. A human's "retry" resumes it. It reports whether it
// blocked the mailbox.
func (m *Machine) crashLooping(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	if mb.LeaseAttempts <= m.cfg.PoisonAttempts || !mb.State.Working() || mb.State == StateBlocked {
		return false, nil
	}
	m.log.Error("mailbox blocked: its passes keep stopping the process", "mailbox_id", mb.ID, "claims", mb.LeaseAttempts)
	from := mb.State
	reason := fmt.Sprintf("the last %d attempts to work on this issue stopped Alfred itself (in the %s step), so I stopped trying.",
		mb.LeaseAttempts-1, from)
	if err := m.block(ctx, bot, mb, onBlockedLabel, from, reason); err != nil {
		return true, err
	}
	return true, m.store.Save(ctx, mb)
}

// ReportFailure counts a failed pass of the mailbox, made under the lease of owner; at the
// FailureStreak-th failure in a row it says in the issue that Alfred cannot go on for now, once
// per streak. A mailbox whose lease owner is no longer owner (another worker took it while the
// pass failed) is left alone: its data and its issue are the new holder's. Failures to report
// are logged only.
func (m *Machine) ReportFailure(ctx context.Context, mailboxID int64, owner string, passErr error) {
	mb, err := m.store.Get(ctx, mailboxID)
	if err != nil {
		return
	}
	if deref(mb.LeaseOwner) != owner {
		m.log.Warn("a failed pass of a mailbox another worker holds now is not counted", "mailbox_id", mb.ID, "err", passErr)
		return
	}
	bot, ok := m.bots[mb.Forge]
	if !ok || !mb.State.Working() {
		return
	}
	mb.Data.FailedPasses++
	if err := m.store.SaveData(ctx, mb); err != nil {
		m.log.Warn("could not count a failed pass", "mailbox_id", mb.ID, "err", err)
		return
	}
	if mb.Data.FailedPasses != m.cfg.FailureStreak {
		return
	}
	mb.Data.StuckReports++
	if err := m.store.SaveData(ctx, mb); err != nil {
		m.log.Warn("could not count a failure report", "mailbox_id", mb.ID, "err", err)
		return
	}
	body := fmt.Sprintf("I cannot go on for now: %s\n\nI will keep retrying; nothing is needed from you unless this stays.",
		passErr.Error())
	if err := m.post(ctx, bot, mb, fmt.Sprintf("stuck-%d", mb.Data.StuckReports), "stuck", body); err != nil {
		m.log.Warn("could not report a failed pass in the issue", "mailbox_id", mb.ID, "err", err)
	}
}

// timers fires what the state's wake rule says is due: the question deadline or a CI poll.
func (m *Machine) timers(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	switch def(mb.State).Wake {
	case wakeDeadline:
		if closed, err := m.closeTicks(ctx, bot, mb); closed || err != nil {
			return closed, err
		}
		return m.deadline(ctx, bot, mb)
	case wakeCIPoll:
		if mb.WakeAt != nil && m.now().Before(*mb.WakeAt) {
			return false, nil
		}
		if fired, err := m.reviewTimers(ctx, bot, mb); fired || err != nil {
			return fired, err
		}
		state := mb.State
		_, err := m.checkCI(ctx, bot, mb)
		return mb.State != state, err
	case wakeReview:
		return m.reviewTimers(ctx, bot, mb)
	}
	return false, nil
}

// setWake sets the next timer of the mailbox from the state's wake rule.
func (m *Machine) setWake(ctx context.Context, mb *Mailbox) {
	prev := mb.WakeAt
	mb.WakeAt = nil
	switch def(mb.State).Wake {
	case wakeRun:
		if mb.Data.ShadowParked == string(mb.State) {
			// Shadow mode holds the run: look again after a CI poll's time, so that a project
			// switched to live starts it.
			t := m.now().Add(m.cfg.CIPoll)
			mb.WakeAt = &t
			break
		}
		// A run is due (queued for a run worker, or an infrastructure error stopped it). A
		// mailbox already waiting keeps its place in the queue.
		t := m.now()
		if prev != nil && !prev.After(t) {
			t = *prev
		}
		mb.WakeAt = &t
	case wakeDeadline:
		if qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round); err == nil && len(qs) > 0 {
			t := earliest(qs[0].DeadlineAt, mb.Data.TicksDue)
			mb.WakeAt = &t
		}
	case wakeCIPoll:
		t := m.now().Add(m.cfg.CIPoll)
		if !mb.Data.CIWaitUntil.IsZero() && mb.Data.CIWaitUntil.Before(t) && m.now().Before(mb.Data.CIWaitUntil) {
			t = mb.Data.CIWaitUntil
		}
		t = earliest(t, mb.Data.ReviewDue)
		mb.WakeAt = &t
	case wakeReview:
		t := earliest(m.now().Add(m.cfg.CIPoll), mb.Data.MergeCheckAt, mb.Data.ReviewDue)
		mb.WakeAt = &t
	}
}

// earliest returns the earliest of t and the non-zero times of others.
func earliest(t time.Time, others ...time.Time) time.Time {
	for _, o := range others {
		if !o.IsZero() && o.Before(t) {
			t = o
		}
	}
	return t
}

// follow moves the mailbox along the table's transition on trigger from its state and writes
// the new status label.
func (m *Machine) follow(ctx context.Context, bot Bot, mb *Mailbox, on trigger) error {
	to, err := next(mb.State, on)
	if err != nil {
		return err
	}
	return m.setState(ctx, bot, mb, to)
}

// setState moves the mailbox to s and writes the status label difference on the issue,
// reading the issue's labels first so a human's concurrent change is respected.
func (m *Machine) setState(ctx context.Context, bot Bot, mb *Mailbox, s State) error {
	mb.State = s
	mb.Data.ShadowParked = ""
	issue, err := bot.Forge.Issue(ctx, mb.Ref())
	if err != nil {
		return fmt.Errorf("read labels: %w", err)
	}
	add, remove := m.cfg.Labels.StatusDiff(issue.Labels, s)
	if len(add)+len(remove) > 0 {
		if err := bot.Forge.SetLabels(ctx, mb.Ref(), add, remove); err != nil {
			return fmt.Errorf("set status label: %w", err)
		}
	}
	// The mailbox's own view changes by the status label only: a label a human added or removed
	// meanwhile is an event (a delivery, or reconciliation), which must still find the difference.
	// In shadow mode the status label is not on the forge, so the view keeps the forge's labels.
	if !m.settings(mb.Repo).Shadow {
		knownAdd, knownRemove := m.cfg.Labels.StatusDiff(mb.Labels, s)
		labels := slices.DeleteFunc(slices.Clone([]string(mb.Labels)), func(l string) bool { return slices.Contains(knownRemove, l) })
		mb.Labels = append(labels, knownAdd...)
	}
	mb.Assignees = issue.Assignees
	if def(s).Wake == wakeCIPoll {
		// Poll at once: due now, not "never" (nil), for the mailbox may be saved with it
		// before the pass sets its next wake (the run's outcome is saved as soon as it is
		// applied), and a pass cut there (a forge error, the process stopping) must leave it
		// due for the next pass, on this replica or another.
		now := m.now()
		mb.WakeAt = &now
	}
	return nil
}

// ensureLabels creates the labels maintainers add by hand (type::…, ai::validate_plan) and
// the status labels in the repository, once per repository and process: a forge refuses to add
// a label that does not exist. A failure is logged, not fatal: Alfred creates the labels it
// adds itself anyway.
func (m *Machine) ensureLabels(ctx context.Context, bot Bot, mb *Mailbox) {
	key := mb.Forge + "\x00" + mb.Repo
	m.known.mu.Lock()
	done := m.known.labels[key]
	m.known.mu.Unlock()
	if done {
		return
	}
	if err := bot.Forge.EnsureLabels(ctx, mb.Repo, m.cfg.Labels.All()); err != nil {
		m.log.Warn("could not create the labels in the repository", "repo", mb.Repo, "err", err)
		return
	}
	m.known.mu.Lock()
	m.known.labels[key] = true
	m.known.mu.Unlock()
}

// orClose turns a 404 on the issue into a clean close of the mailbox, and a refused post into
// a block (postRefused). A 404 is the issue's only when a read of the issue (or merge request)
// says so too: any other object gone (a pipeline, a downstream pipeline of another project) is
// a failed pass.
func (m *Machine) orClose(ctx context.Context, bot Bot, mb *Mailbox, err error) error {
	if errors.Is(err, ErrPostRefused) {
		return m.postRefused(ctx, bot, mb, err)
	}
	if !errors.Is(err, forge.ErrNotFound) {
		return err
	}
	if m.issueExists(ctx, bot, mb.Ref()) {
		return err // something else is gone (a pipeline, another project's): a failed pass
	}
	m.log.Info("the issue is gone; closing its mailbox", "mailbox_id", mb.ID)
	if _, err := m.cancel(ctx, mb, onIssueGone, "the issue no longer exists"); err != nil {
		return err
	}
	if err := m.store.Save(ctx, mb); err != nil {
		return err
	}
	return m.drain(ctx, mb, "the issue no longer exists")
}

// drain marks every pending event processed without acting on it.
func (m *Machine) drain(ctx context.Context, mb *Mailbox, outcome string) error {
	evs, err := m.store.PendingEvents(ctx, mb.ID)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := m.store.MarkProcessed(ctx, e.ID, outcome); err != nil {
			return err
		}
	}
	return nil
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

func (m *Machine) mrWord(bot Bot) string {
	if bot.Forge.Kind() == forge.KindForgejo {
		return "pull request"
	}
	return "merge request"
}

func (m *Machine) mrRef(bot Bot, n int64) string {
	if bot.Forge.Kind() == forge.KindForgejo {
		return fmt.Sprintf("pull request #%d", n)
	}
	return fmt.Sprintf("merge request !%d", n)
}

// errRunHeld is runPhase's answer when the pass's run gate (withRunGate) holds a new run.
var errRunHeld = errors.New("a new run is held: the process drains or every claim is paused")

// runGateKey carries, in a pass's context, whether its process may still start a run
// (withRunGate).
type runGateKey struct{}

// withRunGate returns ctx with may, which a pass asks before each run it would start: a claim
// checks the drain and the pauses once, but one pass may run one phase after another (the
// functional analysis, then the technical one), and a drain set meanwhile must hold the next.
func withRunGate(ctx context.Context, may func() bool) context.Context {
	return context.WithValue(ctx, runGateKey{}, may)
}

// mayStartRuns reports whether the pass of ctx may start a run (true without a gate).
func mayStartRuns(ctx context.Context) bool {
	may, ok := ctx.Value(runGateKey{}).(func() bool)
	return !ok || may()
}
