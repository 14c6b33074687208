package mailbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Phase returns the phase the state runs (its row in the lifecycle table), "" for a state that
// runs none: what a mailbox in s is queued for.
func (s State) Phase() phase.Phase { return def(s).Phase }

// Settings are the settings an organization or a project may override (config scopes), as
// the machine reads them per repository.
type Settings struct {
	BranchPrefix     string
	QuestionDeadline time.Duration
	CIFixAttempts    int
	// BudgetUSD is the most an issue may cost; nil for no budget.
	BudgetUSD *float64
	// Agents binds phases ("development", "default") to an agent when the project's scope does;
	// a phase it does not name runs its global binding.
	Agents map[string]string
	// AutoMerge turns auto-merge on for every issue of the project (the label does it for one);
	// MergeMethod is how it merges ("" is forge.MergeCommit).
	AutoMerge   bool
	MergeMethod forge.MergeMethod
	// Shadow puts the project in shadow mode: Alfred computes everything but writes nothing to
	// the forge (Shadow, spec/operations.md "Shadow mode"), and starts no run that pushes.
	Shadow bool
	// SelfReview is on when the bot reads its own merge request before a human does (the
	// self_review phase; Config.SelfReview says how).
	SelfReview bool
}

// agent returns the agent the project binds to p, "" for the global binding.
func (s Settings) agent(p phase.Phase) string {
	if a := s.Agents[string(p)]; a != "" {
		return a
	}
	return s.Agents["default"]
}

// UsageReader reads what a mailbox's runs used: the store implements it from runs and
// llm_sessions.
type UsageReader interface {
	// Usage returns the mailbox's finished runs, oldest first, with their tokens and cost.
	Usage(ctx context.Context, mailboxID int64) ([]ProgressRun, error)
}

// settings returns the settings in force for repo.
func (m *Machine) settings(repo string) Settings {
	if m.cfg.Settings != nil {
		s := m.cfg.Settings(repo)
		s.BranchPrefix = cmp.Or(s.BranchPrefix, m.cfg.BranchPrefix)
		s.QuestionDeadline = cmp.Or(s.QuestionDeadline, m.cfg.QuestionDeadline)
		s.MergeMethod = cmp.Or(s.MergeMethod, m.cfg.MergeMethod)
		return s
	}
	return Settings{BranchPrefix: m.cfg.BranchPrefix, QuestionDeadline: m.cfg.QuestionDeadline,
		CIFixAttempts: m.cfg.CIFixAttempts, AutoMerge: m.cfg.AutoMerge, MergeMethod: m.cfg.MergeMethod,
		SelfReview: m.cfg.SelfReview.Enabled}
}

// withinBudget reports whether the next run of mb may start; when not, reason says why for the
// issue. A run allowed only by ai::retry_once uses the permission up.
func (m *Machine) withinBudget(ctx context.Context, mb *Mailbox) (bool, string, error) {
	budget := m.settings(mb.Repo).BudgetUSD
	if m.cfg.Usage == nil || budget == nil {
		return true, "", nil
	}
	runs, err := m.cfg.Usage.Usage(ctx, mb.ID)
	if err != nil {
		return false, "", err
	}
	spent, unrated := Progress{Runs: runs}.Spent()
	if ok, _ := Budget(spent, unrated, budget, false); ok {
		return true, "", nil
	}
	ok, reason := Budget(spent, unrated, budget, mb.Data.RetryOnce)
	if ok {
		mb.Data.RetryOnce = false
	}
	return ok, reason, nil
}

// postProgress edits the status comment: running is the phase starting now ("" once a run
// ended). Failures are logged, not returned: the comment is informative and the next run or
// pass writes it again.
func (m *Machine) postProgress(ctx context.Context, bot Bot, mb *Mailbox, running phase.Phase, since time.Time) {
	if m.cfg.Usage == nil {
		return
	}
	runs, err := m.cfg.Usage.Usage(ctx, mb.ID)
	if err != nil {
		m.log.Warn("status comment not updated", "mailbox_id", mb.ID, "err", err)
		return
	}
	now := m.now()
	if mb.State.Closed() && mb.ClosedAt != nil {
		// The work is over: the comment says how long it took, the same whenever it is
		// rendered again (a later event's pass), so that no event edits it only for the clock.
		now = *mb.ClosedAt
	}
	p := Progress{Phase: string(running), Running: running != "", Since: since, Now: now, Runs: runs,
		BudgetUSD: m.settings(mb.Repo).BudgetUSD, Done: mb.State == StateDone}
	if mb.State == StateBlocked {
		p.Blocked = mb.Data.Blocked
	}
	if mb.State == StateInReview {
		p.AutoMergeWaits = mb.Data.AutoMergeWaits
	}
	if len(runs) > 0 {
		p.Started = mb.Data.FirstRunAt
	}
	if !p.Running && !p.Done && mb.State.Phase() != "" {
		p.Phase, p.Since = string(mb.State.Phase()), m.now()
	}
	if err := m.post(ctx, bot, mb, ProgressKey, "status", RenderProgress(p)); err != nil {
		m.log.Warn("status comment not updated", "mailbox_id", mb.ID, "err", err)
	}
}

// retryOnce handles ai::retry_once: the label is removed whoever set it (it is a one-shot
// request); a writer's grants one more run past the budget and, when the mailbox is blocked,
// resumes it with one more attempt (the attempts used stay counted).
func (m *Machine) retryOnce(ctx context.Context, bot Bot, mb *Mailbox, sender string, eventID int64) (string, error) {
	if ok, refusal, err := m.oneShot(ctx, bot, mb, m.cfg.Labels.RetryOnce, sender, eventID, "allow one more run"); !ok {
		return refusal, err
	}
	mb.Data.RetryOnce = true
	if mb.State != StateBlocked {
		return "one more run allowed past the budget", nil
	}
	// The attempts used stay counted: this is exactly one more run.
	return m.resume(ctx, bot, mb, sender, eventID, false, fmt.Sprintf("Trying once more, as asked by @%s.", sender))
}

// oneShot handles a label that is a one-shot request (ai::validate_plan, ai::retry_once): it is
// removed whoever set it, so that it can be set again. ok is true when sender may ask (write
// access); otherwise the refusal has been said in the issue and is the event's outcome.
func (m *Machine) oneShot(ctx context.Context, bot Bot, mb *Mailbox, label, sender string, eventID int64, what string) (ok bool, refusal string, err error) {
	if err := bot.Forge.SetLabels(ctx, mb.Ref(), nil, []string{label}); err != nil {
		return false, "", fmt.Errorf("remove %s: %w", label, err)
	}
	mb.Labels = slices.DeleteFunc(mb.Labels, func(l string) bool { return strings.EqualFold(l, label) })
	return true, "", nil // the label passed the gate already (gateLabels)
}
