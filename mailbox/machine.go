package mailbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gosimple/slug"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Config tunes the lifecycle. Zero values take the documented defaults.
type Config struct {
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
	// BranchPrefix starts every branch name (default "agent/").
	BranchPrefix string
	// FailureStreak is how many failed steps in a row (forge, database, Docker or git
	// unavailable) make Alfred say so in the issue (default 3); the comment is posted once per
	// streak.
	FailureStreak int
	// Redact censors secrets in every comment and merge request description posted (identity
	// when nil); cmd/alfred passes the configuration's internal/censor.Censor.
	Redact func(string) string
	// SessionResume reports whether runs of a repository continue one agent session per
	// mailbox (config sessions.agent_session_resume and its overrides); nil means on.
	SessionResume func(repo string) bool
}

func (c Config) withDefaults() Config {
	c.Labels = c.Labels.WithDefaults()
	c.QuestionDeadline = cmp.Or(c.QuestionDeadline, 24*time.Hour)
	c.CIWait = cmp.Or(c.CIWait, 30*time.Minute)
	c.CIPoll = cmp.Or(c.CIPoll, 30*time.Second)
	c.CIFixAttempts = cmp.Or(c.CIFixAttempts, 3)
	c.BranchPrefix = cmp.Or(c.BranchPrefix, "agent/")
	c.FailureStreak = cmp.Or(c.FailureStreak, 3)
	if c.Redact == nil {
		c.Redact = func(s string) string { return s }
	}
	return c
}

// Bot is one configured forge as the machine sees it.
type Bot struct {
	Forge forge.Forge
	// Login is the bot's user name on that forge.
	Login string
	// OtherBots are logins of other bots whose events and mentions never start work.
	OtherBots []string
}

// Machine applies events and timers to mailboxes and starts the phases they call for.
type Machine struct {
	cfg   Config
	store *Store
	bots  map[string]Bot
	exec  Executor
	now   func() time.Time
	log   *slog.Logger

	mu     sync.Mutex
	perms  map[string]permEntry
	labels map[string]bool // forge + repo whose labels exist
}

type permEntry struct {
	ok  bool
	exp time.Time
}

// NewMachine wires a machine. bots maps a configured forge name to its Bot; now may be nil
// (time.Now).
func NewMachine(cfg Config, store *Store, bots map[string]Bot, exec Executor, now func() time.Time, log *slog.Logger) *Machine {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Machine{cfg: cfg.withDefaults(), store: store, bots: bots, exec: exec, now: now, log: log,
		perms: map[string]permEntry{}, labels: map[string]bool{}}
}

// Step brings a leased mailbox up to date: it cleans up after a run whose worker died, applies
// the pending events in arrival order (a burst of label or assignee changes is folded), fires
// due timers (question deadlines, CI waits), runs the phase the state calls for, and repeats
// until nothing is left to do. It returns an error only for failures worth a retry (forge or
// database unavailable); the events stay pending then.
func (m *Machine) Step(ctx context.Context, mb *Mailbox) error {
	log := m.log.With("mailbox_id", mb.ID, "forge", mb.Forge, "repo", mb.Repo, "issue", mb.Number)
	bot, ok := m.bots[mb.Forge]
	if !ok {
		return m.drain(ctx, mb, "no forge named "+mb.Forge+" is configured")
	}
	// Runs left running by a stopped worker: reattach to a live container and collect its
	// outcome (applied by runPhase), or interrupt the run when nothing is left to collect.
	if _, err := m.recoverRuns(ctx, &bot, mb, true); err != nil {
		log.Warn("recovery of unfinished runs failed", "err", err)
		return err
	}
	for range 20 {
		progressed, err := m.applyEvents(ctx, bot, mb)
		if err != nil {
			return m.orClose(ctx, bot, mb, err)
		}
		if mb.State.Closed() || mb.State == StateIdle || mb.MergeRequest {
			break
		}
		fired, err := m.timers(ctx, bot, mb)
		if err != nil {
			return m.orClose(ctx, bot, mb, err)
		}
		ran := false
		if phaseOf(mb.State) != "" {
			if err := m.runPhase(ctx, bot, mb); err != nil {
				return m.orClose(ctx, bot, mb, err)
			}
			ran = true
		}
		if !progressed && !fired && !ran {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// A recovered run the state no longer calls for is not applied later.
	if err := m.store.DiscardUnapplied(ctx, mb.ID); err != nil {
		return err
	}
	m.setWake(ctx, mb)
	mb.Data.StepFailures = 0
	return m.store.Save(ctx, nil, mb)
}

// ReportFailure counts a failed step of the mailbox; at the FailureStreak-th failure in a row
// it says in the issue that Alfred cannot go on for now, once per streak. Failures to report
// are logged only.
func (m *Machine) ReportFailure(ctx context.Context, mailboxID int64, stepErr error) {
	mb, err := m.store.Get(ctx, mailboxID)
	if err != nil {
		return
	}
	bot, ok := m.bots[mb.Forge]
	if !ok || mb.State == StateIdle || mb.State.Closed() {
		return
	}
	mb.Data.StepFailures++
	if err := m.store.SaveData(ctx, mb); err != nil {
		m.log.Warn("could not count a failed step", "mailbox_id", mb.ID, "err", err)
		return
	}
	if mb.Data.StepFailures != m.cfg.FailureStreak {
		return
	}
	mb.Data.StuckReports++
	if err := m.store.SaveData(ctx, mb); err != nil {
		m.log.Warn("could not count a failure report", "mailbox_id", mb.ID, "err", err)
		return
	}
	body := fmt.Sprintf("I cannot go on for now: %s\n\nI will keep retrying; nothing is needed from you unless this stays.",
		stepErr.Error())
	if err := m.post(ctx, bot, mb, fmt.Sprintf("stuck-%d", mb.Data.StuckReports), "stuck", body); err != nil {
		m.log.Warn("could not report a failed step in the issue", "mailbox_id", mb.ID, "err", err)
	}
}

// orClose turns a 404 on the issue into a clean close of the mailbox.
func (m *Machine) orClose(ctx context.Context, bot Bot, mb *Mailbox, err error) error {
	if !errors.Is(err, forge.ErrNotFound) {
		return err
	}
	m.log.Info("the issue is gone; closing its mailbox", "mailbox_id", mb.ID)
	if err := m.closeMailbox(ctx, mb); err != nil {
		return err
	}
	now := m.now()
	mb.State, mb.ClosedAt, mb.WakeAt = StateCancelled, &now, nil
	if err := m.store.Save(ctx, nil, mb); err != nil {
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
		if err := m.store.MarkProcessed(ctx, nil, e.ID, outcome); err != nil {
			return err
		}
	}
	return nil
}

func (m *Machine) applyEvents(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	evs, err := m.store.PendingEvents(ctx, mb.ID)
	if err != nil || len(evs) == 0 {
		return false, err
	}
	for _, g := range foldEvents(evs) {
		outcome, err := m.handle(ctx, bot, mb, g.last)
		if err != nil {
			return true, err
		}
		err = m.store.WithTx(ctx, func(q Querier) error {
			if err := m.store.Save(ctx, q, mb); err != nil {
				return err
			}
			for _, id := range g.ids {
				if err := m.store.MarkProcessed(ctx, q, id, outcome); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return true, err
		}
		m.log.Debug("event applied", "mailbox_id", mb.ID, "event", g.last.Event.Type, "outcome", outcome)
	}
	return true, nil
}

type eventGroup struct {
	ids  []int64
	last StoredEvent
}

// foldEvents folds consecutive label (or assignee) events of one target into one: Forgejo
// sends the whole list each time, so only the last list counts; GitLab's previous list is
// taken from the first event of the run.
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
				prev.ids = append(prev.ids, e.ID)
				prev.last = merged
				continue
			}
		}
		out = append(out, eventGroup{ids: []int64{e.ID}, last: e})
	}
	return out
}

// handle applies one event to the mailbox and returns a short outcome for the events table.
func (m *Machine) handle(ctx context.Context, bot Bot, mb *Mailbox, se StoredEvent) (string, error) {
	ev := se.Event
	fromBot := strings.EqualFold(ev.Sender.Login, bot.Login)
	otherBot := ev.Sender.Bot || slices.ContainsFunc(bot.OtherBots, func(b string) bool { return strings.EqualFold(b, ev.Sender.Login) })
	onIssue := !ev.Target.MergeRequest && ev.Target.Number == mb.Number && !mb.MergeRequest
	onOurMR := ev.Target.MergeRequest && mb.MRNumber != 0 && ev.Target.Number == mb.MRNumber
	if ev.MergeRequest != nil && mb.Branch != "" && ev.MergeRequest.SourceBranch == mb.Branch && !mb.MergeRequest {
		onOurMR = true
	}
	if onIssue {
		mb.Title = cmp.Or(ev.Title, mb.Title)
		mb.Author = cmp.Or(mb.Author, ev.Author.Login)
	}
	if mb.MergeRequest {
		return "recorded: merge requests that are not Alfred's are not acted on", nil
	}

	switch ev.Type {
	case forge.EventIssueOpened, forge.EventAssignees:
		if !onIssue {
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
		if fromBot {
			return "own change", nil
		}
		added, removed := diff(prev, ev.Assignees)
		mb.Assignees = ev.Assignees
		if containsFold(added, bot.Login) {
			if otherBot {
				return "ignored: assigned by another bot", nil
			}
			return m.start(ctx, bot, mb, ev.Sender.Login, se.ID)
		}
		working := !mb.State.Closed() && mb.State != StateIdle
		if working && (containsFold(removed, bot.Login) || !containsFold(ev.Assignees, bot.Login)) {
			return m.cancel(ctx, mb, "the bot was unassigned by @"+ev.Sender.Login)
		}
		return "assignees recorded", nil

	case forge.EventLabels:
		if !onIssue {
			return "ignored: labels of a merge request", nil
		}
		if fromBot || !ev.LabelsKnown {
			return "own change", nil
		}
		prev := []string(mb.Labels)
		if ev.PreviousLabels != nil {
			prev = ev.PreviousLabels
		}
		added, _ := diff(prev, ev.Labels)
		mb.Labels = ev.Labels
		return m.labelsAdded(ctx, bot, mb, added, ev.Sender.Login, se.ID)

	case forge.EventComment, forge.EventCommentEdited:
		if fromBot {
			return "own comment", nil
		}
		if otherBot {
			return "ignored: comment by another bot", nil
		}
		if !onIssue || ev.Comment == nil {
			return "comment recorded", nil
		}
		return m.comment(ctx, bot, mb, ev, se.ID)

	case forge.EventIssueClosed:
		if !onIssue || mb.State.Closed() || mb.State == StateIdle {
			return "closed: nothing running", nil
		}
		return m.done(ctx, bot, mb, "the issue was closed")

	case forge.EventIssueEdited:
		return "title and description recorded", nil

	case forge.EventMergeRequestMerged:
		if !onOurMR || mb.State.Closed() {
			return "ignored: not Alfred's merge request", nil
		}
		return m.done(ctx, bot, mb, "the merge request was merged")

	case forge.EventMergeRequestClosed:
		if !onOurMR || mb.State.Closed() {
			return "ignored: not Alfred's merge request", nil
		}
		return m.cancel(ctx, mb, "the merge request was closed without merge")

	case forge.EventMergeRequestOpened, forge.EventMergeRequestUpdated:
		if onOurMR && ev.MergeRequest != nil && ev.MergeRequest.HeadSHA != "" && mb.MRNumber != 0 {
			mb.HeadSHA = ev.MergeRequest.HeadSHA
		}
		return "merge request recorded", nil

	case forge.EventPipeline:
		if mb.State != StateInCI {
			return "pipeline recorded", nil
		}
		if ev.Pipeline != nil && ev.Pipeline.SHA != "" && ev.Pipeline.SHA != mb.HeadSHA {
			return "ignored: pipeline of an older commit", nil
		}
		return m.checkCI(ctx, bot, mb)
	}
	return "recorded", nil
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// canWrite asks the forge whether login has write access, caching the answer for a minute.
func (m *Machine) canWrite(ctx context.Context, bot Bot, repo, login string) (bool, error) {
	key := repo + "\x00" + strings.ToLower(login)
	m.mu.Lock()
	e, ok := m.perms[key]
	m.mu.Unlock()
	if ok && m.now().Before(e.exp) {
		return e.ok, nil
	}
	allowed, err := bot.Forge.CanWrite(ctx, repo, login)
	if err != nil {
		return false, fmt.Errorf("check permission of %s: %w", login, err)
	}
	m.mu.Lock()
	m.perms[key] = permEntry{ok: allowed, exp: m.now().Add(time.Minute)}
	m.mu.Unlock()
	return allowed, nil
}

// ensureLabels creates the labels maintainers add by hand (type::…, ai::validate_plan) and
// the status labels in the repository, once per repository and process: a forge refuses to add
// a label that does not exist. A failure is logged, not fatal: Alfred creates the labels it
// adds itself anyway.
func (m *Machine) ensureLabels(ctx context.Context, bot Bot, mb *Mailbox) {
	key := mb.Forge + "\x00" + mb.Repo
	m.mu.Lock()
	done := m.labels[key]
	m.mu.Unlock()
	if done {
		return
	}
	if err := bot.Forge.EnsureLabels(ctx, mb.Repo, m.cfg.Labels.All()); err != nil {
		m.log.Warn("could not create the labels in the repository", "repo", mb.Repo, "err", err)
		return
	}
	m.mu.Lock()
	m.labels[key] = true
	m.mu.Unlock()
}

// refuse posts, once per event, that login may not do what they tried.
func (m *Machine) refuse(ctx context.Context, bot Bot, mb *Mailbox, eventID int64, login, what string) (string, error) {
	body := fmt.Sprintf("@%s, only a project member with write access can %s, so I am leaving this as it is.", login, what)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("refused-%d", eventID), "refused", body); err != nil {
		return "", err
	}
	return "refused: @" + login + " has no write access", nil
}

// start begins (or begins again) the lifecycle after the bot was assigned.
func (m *Machine) start(ctx context.Context, bot Bot, mb *Mailbox, sender string, eventID int64) (string, error) {
	if mb.State != StateIdle && !mb.State.Closed() {
		return "already working on it", nil
	}
	if ok, err := m.canWrite(ctx, bot, mb.Repo, sender); err != nil {
		return "", err
	} else if !ok {
		return m.refuse(ctx, bot, mb, eventID, sender, "assign me to an issue")
	}
	issue, err := bot.Forge.Issue(ctx, mb.Ref())
	if err != nil {
		return "", fmt.Errorf("read issue: %w", err)
	}
	m.ensureLabels(ctx, bot, mb)
	mb.Title, mb.Author, mb.Labels, mb.Assignees = issue.Title, issue.Author.Login, issue.Labels, issue.Assignees
	gen := mb.Data.Round + 1 // a restarted lifecycle asks its questions in new rounds
	// A new lifecycle: fresh data, but the counters in comment keys go on, so that a restarted
	// lifecycle posts new comments instead of editing the previous lifecycle's.
	mb.Data = Data{Round: gen, Blocks: mb.Data.Blocks, StuckReports: mb.Data.StuckReports}
	mb.ClosedAt, mb.MRNumber, mb.HeadSHA = nil, 0, ""
	ack := fmt.Sprintf("Thanks @%s, I am on it. You can follow where I am in the `status::` label of this issue.",
		cmp.Or(mb.Author, sender))
	if err := m.post(ctx, bot, mb, fmt.Sprintf("ack-%d", gen), "ack", ack); err != nil {
		return "", err
	}
	mb.Data.Acknowledged = true
	for _, l := range mb.Labels {
		if t := m.cfg.Labels.TypeOf(l); t != "" {
			mb.Type = t
			break
		}
	}
	if mb.Type == "" {
		return "started: asked for the type", m.askType(ctx, bot, mb)
	}
	return "started", m.afterType(ctx, bot, mb)
}

func (m *Machine) askType(ctx context.Context, bot Bot, mb *Mailbox) error {
	q := TypeQuestion()
	q.Context = fmt.Sprintf("I could not find a type label on the issue. You can also add `%s`, `%s`, `%s` or `%s` yourself.",
		m.cfg.Labels.TypeTask, m.cfg.Labels.TypeBug, m.cfg.Labels.TypeAnalysis, m.cfg.Labels.TypeQuestion)
	return m.ask(ctx, bot, mb, StateWaitingType, "Before I start, tell me what kind of work this is.", []phase.Question{q})
}

// ask stores and posts a question block as a new round and hands the turn to the author.
func (m *Machine) ask(ctx context.Context, bot Bot, mb *Mailbox, state State, intro string, qs []phase.Question) error {
	mb.Data.Round++
	round := mb.Data.Round
	deadline := m.now().Add(m.cfg.QuestionDeadline)
	if m.cfg.QuestionDeadline >= time.Minute && !deadline.Equal(deadline.Truncate(time.Minute)) {
		// Shown to the minute in the issue: round up, never announce a time earlier than the real one.
		deadline = deadline.Truncate(time.Minute).Add(time.Minute)
	}
	rows := make([]Question, 0, len(qs))
	for _, q := range qs {
		opts, _ := json.Marshal(q.Options)
		rows = append(rows, Question{MailboxID: mb.ID, Round: round, QID: q.ID, Title: q.Title,
			Context: q.Context, OptionsJSON: string(opts), Default: q.Default, DeadlineAt: deadline})
	}
	if err := m.store.InsertQuestions(ctx, nil, rows); err != nil {
		return err
	}
	stored, err := m.store.Questions(ctx, mb.ID, round)
	if err != nil {
		return err
	}
	if len(stored) > 0 {
		deadline = stored[0].DeadlineAt // a retried round keeps its first deadline
	}
	mb.Data.QuestionIntro = intro
	body := RenderQuestions(intro, qs, deadline)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("questions-%d", round), "questions", body); err != nil {
		return err
	}
	if mb.Author != "" && !strings.EqualFold(mb.Author, bot.Login) && !containsFold(mb.Assignees, mb.Author) {
		if err := bot.Forge.SetAssignees(ctx, mb.Ref(), []string{mb.Author}, nil); err != nil {
			return fmt.Errorf("assign the author: %w", err)
		}
		mb.Assignees = append(mb.Assignees, mb.Author)
	}
	return m.setState(ctx, bot, mb, state)
}

// afterType moves on once the type is known.
func (m *Machine) afterType(ctx context.Context, bot Bot, mb *Mailbox) error {
	if mb.Type == "question" {
		return m.setState(ctx, bot, mb, StateAnswering)
	}
	return m.setState(ctx, bot, mb, StateFunctionalAnalysis)
}

// labelsAdded reacts to labels a human added.
func (m *Machine) labelsAdded(ctx context.Context, bot Bot, mb *Mailbox, added []string, sender string, eventID int64) (string, error) {
	if mb.State == StateIdle || mb.State.Closed() {
		return "labels recorded", nil
	}
	for _, l := range added {
		switch {
		case strings.EqualFold(l, m.cfg.Labels.ValidatePlan):
			return m.validate(ctx, bot, mb, sender, eventID)
		case m.cfg.Labels.TypeOf(l) != "" && mb.State == StateWaitingType:
			if ok, err := m.canWrite(ctx, bot, mb.Repo, sender); err != nil {
				return "", err
			} else if !ok && !strings.EqualFold(sender, mb.Author) {
				return m.refuse(ctx, bot, mb, eventID, sender, "set the type")
			}
			mb.Type = m.cfg.Labels.TypeOf(l)
			if err := m.answerRound(ctx, mb, map[string]string{"q1": mb.Type}, sender); err != nil {
				return "", err
			}
			if err := m.markAnswered(ctx, bot, mb, "@"+sender); err != nil {
				return "", err
			}
			if err := m.handBack(ctx, bot, mb); err != nil {
				return "", err
			}
			return "type set by label", m.afterType(ctx, bot, mb)
		case strings.EqualFold(l, m.cfg.Labels.Blocked) && mb.State != StateBlocked:
			mb.Data.BlockedFrom, mb.Data.Blocked = mb.State, "blocked by @"+sender
			mb.State = StateBlocked
			return "blocked by a human", nil
		}
	}
	return "labels recorded", nil
}

func (m *Machine) validate(ctx context.Context, bot Bot, mb *Mailbox, sender string, eventID int64) (string, error) {
	// The label is a one-shot request: it is removed whoever set it, so it can be set again.
	if err := bot.Forge.SetLabels(ctx, mb.Ref(), nil, []string{m.cfg.Labels.ValidatePlan}); err != nil {
		return "", fmt.Errorf("remove %s: %w", m.cfg.Labels.ValidatePlan, err)
	}
	mb.Labels = slices.DeleteFunc(mb.Labels, func(s string) bool { return strings.EqualFold(s, m.cfg.Labels.ValidatePlan) })
	if ok, err := m.canWrite(ctx, bot, mb.Repo, sender); err != nil {
		return "", err
	} else if !ok {
		return m.refuse(ctx, bot, mb, eventID, sender, "validate the plan")
	}
	if mb.State != StateWaitingValidation {
		return "ignored: no plan is waiting for validation", nil
	}
	mb.Data.ValidatedBy = sender
	body := fmt.Sprintf("Plan validated by @%s. Starting the development.", sender)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("validated-%d", mb.Data.Round), "validated", body); err != nil {
		return "", err
	}
	return "plan validated", m.setState(ctx, bot, mb, StateInDevelopment)
}

// comment handles a human comment (or an edit of one, including ticks in Alfred's own
// question block, which the forge reports as an edit by the human).
func (m *Machine) comment(ctx context.Context, bot Bot, mb *Mailbox, ev forge.Event, eventID int64) (string, error) {
	c := ev.Comment
	author := ev.Sender.Login
	switch mb.State {
	case StateWaitingType, StateWaitingInfo:
		qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
		if err != nil {
			return "", err
		}
		if len(qs) == 0 {
			return "no open questions", nil
		}
		if ok, err := m.canWrite(ctx, bot, mb.Repo, author); err != nil {
			return "", err
		} else if !ok && !strings.EqualFold(author, mb.Author) {
			return m.refuse(ctx, bot, mb, eventID, author, "answer my questions")
		}
		rq := toRunnerQuestions(qs)
		var a Answers
		if key, _, ok := ParseMarker(c.Body); ok {
			if key != fmt.Sprintf("questions-%d", mb.Data.Round) {
				return "edit of another Alfred comment", nil
			}
			a = Answers{Choices: ParseTicks(c.Body, rq)}
		} else {
			if ev.Type == forge.EventCommentEdited {
				return "edited comment recorded", nil
			}
			a = ParseReply(c.Body, rq)
		}
		choices := a.Choices
		if err := m.answerRound(ctx, mb, choices, author); err != nil {
			return "", err
		}
		if a.FreeText != "" {
			mb.Data.FreeText = strings.TrimSpace(mb.Data.FreeText + "\n\n@" + author + ": " + a.FreeText)
		}
		return "answered by @" + author, m.afterAnswers(ctx, bot, mb, "@"+author)
	case StateBlocked:
		if !isRetry(c.Body, bot.Login) || ev.Type != forge.EventComment {
			return "comment recorded", nil
		}
		if ok, err := m.canWrite(ctx, bot, mb.Repo, author); err != nil {
			return "", err
		} else if !ok {
			return m.refuse(ctx, bot, mb, eventID, author, "ask me to retry")
		}
		from := cmp.Or(mb.Data.BlockedFrom, StateFunctionalAnalysis)
		mb.Data.Blocked, mb.Data.Failures = "", 0
		if from == StateCIFix {
			mb.Data.CIAttempts = 0
		}
		body := fmt.Sprintf("Retrying as asked by @%s.", author)
		if err := m.post(ctx, bot, mb, fmt.Sprintf("retry-%d", eventID), "retry", body); err != nil {
			return "", err
		}
		return "retry", m.setState(ctx, bot, mb, from)
	}
	return "comment recorded", nil
}

func isRetry(body, login string) bool {
	b := strings.ToLower(strings.TrimSpace(body))
	b = strings.TrimSpace(strings.TrimPrefix(b, "@"+strings.ToLower(login)))
	return b == "retry" || b == "/retry" || b == "retry please" || b == "please retry"
}

func toRunnerQuestions(qs []Question) []phase.Question {
	out := make([]phase.Question, 0, len(qs))
	for _, q := range qs {
		out = append(out, phase.Question{ID: q.QID, Title: q.Title, Context: q.Context, Options: q.Options(), Default: q.Default})
	}
	return out
}

// answerRound records the choices for the current round; questions left open get their
// default, answered by "default".
func (m *Machine) answerRound(ctx context.Context, mb *Mailbox, choices map[string]string, by string) error {
	qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil {
		return err
	}
	if mb.Data.Decisions == nil {
		mb.Data.Decisions = map[string]string{}
	}
	for _, q := range qs {
		if q.Answer != nil {
			continue
		}
		ans, who := choices[q.QID], by
		if ans == "" {
			ans, who = q.Default, "default"
		}
		if err := m.store.AnswerQuestion(ctx, nil, q.ID, ans, who, m.now()); err != nil {
			return err
		}
		label := ans
		for _, o := range q.Options() {
			if o.ID == ans {
				label = o.Label
			}
		}
		if mb.State == StateWaitingType {
			mb.Type = ans
		} else {
			mb.Data.Decisions[q.QID] = label
		}
	}
	return nil
}

// handBack unassigns the author Alfred assigned to answer. It does not trust mb.Assignees: a
// late delivery (Gitea sends "opened" after "assigned" for an issue opened with assignees)
// can overwrite it with a list from before the author was assigned. SetAssignees reads the
// issue and changes nothing when the author is not assigned.
func (m *Machine) handBack(ctx context.Context, bot Bot, mb *Mailbox) error {
	if mb.Author == "" || strings.EqualFold(mb.Author, bot.Login) {
		return nil
	}
	if err := bot.Forge.SetAssignees(ctx, mb.Ref(), nil, []string{mb.Author}); err != nil {
		return fmt.Errorf("unassign the author: %w", err)
	}
	mb.Assignees = slices.DeleteFunc(mb.Assignees, func(s string) bool { return strings.EqualFold(s, mb.Author) })
	return nil
}

// afterAnswers continues once a question round is answered (by a reply, ticks or defaults).
func (m *Machine) afterAnswers(ctx context.Context, bot Bot, mb *Mailbox, by string) error {
	if err := m.markAnswered(ctx, bot, mb, by); err != nil {
		return err
	}
	if err := m.handBack(ctx, bot, mb); err != nil {
		return err
	}
	if mb.State == StateWaitingType {
		if l := m.cfg.Labels.TypeLabel(mb.Type); l != "" {
			if err := bot.Forge.SetLabels(ctx, mb.Ref(), []string{l}, nil); err != nil {
				return fmt.Errorf("set the type label: %w", err)
			}
			mb.Labels = append(mb.Labels, l)
		}
		return m.afterType(ctx, bot, mb)
	}
	return m.finishFunctional(ctx, bot, mb)
}

// markAnswered edits the round's question block in place: the chosen options ticked and who
// answered instead of the deadline, so the block tells what was decided.
func (m *Machine) markAnswered(ctx context.Context, bot Bot, mb *Mailbox, by string) error {
	qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil || len(qs) == 0 {
		return err
	}
	chosen := map[string]string{}
	for _, q := range qs {
		chosen[q.QID] = deref(q.Answer)
	}
	notice := "Answered by " + by + "."
	if by == "default" {
		notice = fmt.Sprintf("No answer by %s: the defaults apply.", qs[0].DeadlineAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	body := RenderAnswered(mb.Data.QuestionIntro, toRunnerQuestions(qs), chosen, notice)
	return m.post(ctx, bot, mb, fmt.Sprintf("questions-%d", mb.Data.Round), "questions", body)
}

// timers fires what is due: question deadlines and CI checks.
func (m *Machine) timers(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	now := m.now()
	switch mb.State {
	case StateWaitingType, StateWaitingInfo:
		qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
		if err != nil || len(qs) == 0 || now.Before(qs[0].DeadlineAt) {
			return false, err
		}
		if err := m.answerRound(ctx, mb, nil, ""); err != nil {
			return false, err
		}
		qs, err = m.store.Questions(ctx, mb.ID, mb.Data.Round)
		if err != nil {
			return false, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "No answer by %s, so I applied the defaults:\n", qs[0].DeadlineAt.UTC().Format("2006-01-02 15:04 UTC"))
		for _, q := range qs {
			fmt.Fprintf(&b, "\n- **%s. %s** → %s", q.QID, q.Title, optionText(q, deref(q.Answer)))
		}
		if err := m.post(ctx, bot, mb, fmt.Sprintf("defaults-%d", mb.Data.Round), "defaults", b.String()); err != nil {
			return false, err
		}
		return true, m.afterAnswers(ctx, bot, mb, "default")
	case StateInCI:
		if mb.WakeAt != nil && now.Before(*mb.WakeAt) {
			return false, nil
		}
		_, err := m.checkCI(ctx, bot, mb)
		return mb.State != StateInCI, err
	}
	return false, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func optionText(q Question, id string) string {
	for i, o := range q.Options() {
		if o.ID == id {
			return fmt.Sprintf("%s. %s", optionLetter(i), o.Label)
		}
	}
	return id
}

// checkCI reads the CI state of the merge request's head commit and moves on.
func (m *Machine) checkCI(ctx context.Context, bot Bot, mb *Mailbox) (string, error) {
	p, err := bot.Forge.CIStatus(ctx, mb.Repo, mb.HeadSHA)
	if err != nil {
		return "", fmt.Errorf("read CI status: %w", err)
	}
	sha7 := mb.HeadSHA[:min(7, len(mb.HeadSHA))]
	switch p.State {
	case forge.CISuccess:
		body := fmt.Sprintf("CI passed on %s. The %s is ready for review.", sha7, m.mrWord(bot))
		if err := m.post(ctx, bot, mb, "ci-"+mb.HeadSHA, "ci", body); err != nil {
			return "", err
		}
		return "ci passed", m.setState(ctx, bot, mb, StateInReview)
	case forge.CIFailed:
		if mb.Data.CIAttempts >= m.cfg.CIFixAttempts {
			return "ci failed", m.block(ctx, bot, mb, StateCIFix,
				fmt.Sprintf("CI still fails on %s after %d fix attempts.", sha7, mb.Data.CIAttempts))
		}
		mb.Data.CIAttempts++
		mb.Data.CILog = formatFailedJobs(p.FailedJobs)
		return "ci failed: fixing", m.setState(ctx, bot, mb, StateCIFix)
	case forge.CIPending:
		return "ci pending", nil
	}
	if m.now().Before(mb.Data.CIWaitUntil) {
		return "waiting for a pipeline", nil
	}
	body := fmt.Sprintf("No pipeline ran on this %s. It is ready for review.", m.mrWord(bot))
	if err := m.post(ctx, bot, mb, "no-pipeline-"+mb.HeadSHA, "ci", body); err != nil {
		return "", err
	}
	return "no pipeline", m.setState(ctx, bot, mb, StateInReview)
}

func formatFailedJobs(jobs []forge.FailedJob) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "## %s\n", j.Name)
		if j.WebURL != "" {
			fmt.Fprintf(&b, "%s\n", j.WebURL)
		}
		if j.Log != "" {
			fmt.Fprintf(&b, "```\n%s\n```\n", strings.TrimSpace(j.Log))
		}
	}
	return b.String()
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

// closeMailbox removes what the mailbox holds on this host: containers, worktrees and the
// agent session state.
func (m *Machine) closeMailbox(ctx context.Context, mb *Mailbox) error {
	if err := m.exec.Cleanup(ctx, mb.ID); err != nil {
		return err
	}
	return m.exec.RemoveSessions(mb.ID)
}

// done closes the lifecycle: status::done, the bot unassigns itself, everything is cleaned.
func (m *Machine) done(ctx context.Context, bot Bot, mb *Mailbox, why string) (string, error) {
	if err := m.closeMailbox(ctx, mb); err != nil {
		return "", err
	}
	if err := m.setState(ctx, bot, mb, StateDone); err != nil {
		return "", err
	}
	if containsFold(mb.Assignees, bot.Login) {
		if err := bot.Forge.SetAssignees(ctx, mb.Ref(), nil, []string{bot.Login}); err != nil {
			return "", fmt.Errorf("unassign the bot: %w", err)
		}
		mb.Assignees = slices.DeleteFunc(mb.Assignees, func(s string) bool { return strings.EqualFold(s, bot.Login) })
	}
	now := m.now()
	mb.ClosedAt, mb.WakeAt = &now, nil
	return "done: " + why, nil
}

// cancel stops whatever runs for the mailbox and closes it, leaving the labels as they are.
func (m *Machine) cancel(ctx context.Context, mb *Mailbox, why string) (string, error) {
	if err := m.closeMailbox(ctx, mb); err != nil {
		return "", err
	}
	now := m.now()
	mb.State, mb.ClosedAt, mb.WakeAt = StateCancelled, &now, nil
	return "cancelled: " + why, nil
}

// block parks the mailbox until a human says "retry".
func (m *Machine) block(ctx context.Context, bot Bot, mb *Mailbox, from State, reason string) error {
	mb.Data.Blocked, mb.Data.BlockedFrom = reason, from
	// Each block is a new comment: Failures and CIAttempts restart after a retry, so they
	// cannot tell a second block from the first.
	mb.Data.Blocks++
	body := fmt.Sprintf("I am blocked: %s\n\nComment `retry` when you want me to try again.", reason)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("blocked-%d-%s-b%d", mb.Data.Round, from, mb.Data.Blocks), "blocked", body); err != nil {
		return err
	}
	return m.setState(ctx, bot, mb, StateBlocked)
}

// setState moves the mailbox to s and writes the status label difference on the issue,
// reading the issue's labels first so a human's concurrent change is respected.
func (m *Machine) setState(ctx context.Context, bot Bot, mb *Mailbox, s State) error {
	mb.State = s
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
	labels := slices.DeleteFunc(slices.Clone(issue.Labels), func(l string) bool { return slices.Contains(remove, l) })
	mb.Labels = append(labels, add...)
	mb.Assignees = issue.Assignees
	if s == StateInCI {
		mb.WakeAt = nil
	}
	return nil
}

// setWake sets the next timer of the mailbox.
func (m *Machine) setWake(ctx context.Context, mb *Mailbox) {
	mb.WakeAt = nil
	if phaseOf(mb.State) != "" {
		// A run is due (an infrastructure error stopped it): come back after the backoff.
		t := m.now()
		mb.WakeAt = &t
		return
	}
	switch mb.State {
	case StateWaitingType, StateWaitingInfo:
		if qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round); err == nil && len(qs) > 0 {
			t := qs[0].DeadlineAt
			mb.WakeAt = &t
		}
	case StateInCI:
		t := m.now().Add(m.cfg.CIPoll)
		if !mb.Data.CIWaitUntil.IsZero() && mb.Data.CIWaitUntil.Before(t) && m.now().Before(mb.Data.CIWaitUntil) {
			t = mb.Data.CIWaitUntil
		}
		mb.WakeAt = &t
	}
}

// post creates or edits the comment with the given key. A row with comment id 0 is written
// before posting; if the process dies between the post and recording its id, the next attempt
// finds the comment by its hidden marker instead of posting it again.
func (m *Machine) post(ctx context.Context, bot Bot, mb *Mailbox, key, kind, body string) error {
	full := Marker(key, kind) + "\n" + m.cfg.Redact(body)
	sum := sha256.Sum256([]byte(full))
	hash := hex.EncodeToString(sum[:])
	ref := mb.Ref()
	pc, err := m.store.PostedComment(ctx, mb.ID, key)
	if err != nil {
		return err
	}
	if pc != nil && pc.CommentID == 0 {
		cs, err := bot.Forge.Comments(ctx, ref)
		if err != nil {
			return fmt.Errorf("list comments: %w", err)
		}
		for _, c := range cs {
			if k, _, ok := ParseMarker(c.Body); ok && k == key && strings.EqualFold(c.Author.Login, bot.Login) {
				pc.CommentID, pc.BodyHash = c.ID, ""
				if c.Body == full {
					pc.BodyHash = hash
				}
				break
			}
		}
	}
	if pc != nil && pc.CommentID != 0 {
		if pc.BodyHash != hash {
			if err := bot.Forge.EditComment(ctx, ref, pc.CommentID, full); err != nil {
				return fmt.Errorf("edit comment %s: %w", key, err)
			}
		}
		pc.BodyHash = hash
		return m.store.RecordComment(ctx, *pc)
	}
	if err := m.store.RecordComment(ctx, PostedComment{MailboxID: mb.ID, Key: key, Kind: kind}); err != nil {
		return err
	}
	id, err := bot.Forge.Comment(ctx, ref, full)
	if err != nil {
		return fmt.Errorf("post comment %s: %w", key, err)
	}
	return m.store.RecordComment(ctx, PostedComment{MailboxID: mb.ID, Key: key, Kind: kind, CommentID: id, BodyHash: hash})
}

// BranchName returns "{prefix}issue-{number}-{slug of the title}", the slug transliterated to
// ASCII and cut at 40 characters on a word boundary.
func BranchName(prefix string, number int64, title string) string {
	s := slug.Make(title)
	if len(s) > 40 {
		s = s[:40]
		if i := strings.LastIndex(s, "-"); i > 10 {
			s = s[:i]
		}
	}
	name := fmt.Sprintf("%sissue-%d", prefix, number)
	if s != "" {
		name += "-" + s
	}
	return name
}
