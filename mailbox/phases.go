package mailbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// phaseOf returns the run a state calls for, "" when the state waits for something else.
func phaseOf(s State) string {
	switch s {
	case StateFunctionalAnalysis:
		return phase.KeyOf(phase.Analysis, phase.StepFunctional)
	case StateTechnicalAnalysis:
		return phase.KeyOf(phase.Analysis, phase.StepTechnical)
	case StateInDevelopment:
		return string(phase.Development)
	case StateCIFix:
		return string(phase.CIFix)
	case StateAnswering:
		return string(phase.Answer)
	}
	return ""
}

// cancelPollInterval is how often a running phase looks for an event that cancels it
// (the issue closed, the bot unassigned, the merge request closed).
const cancelPollInterval = 2 * time.Second

// runPhase runs the phase the state calls for and applies its result.
func (m *Machine) runPhase(ctx context.Context, bot Bot, mb *Mailbox) error {
	state := mb.State
	in := phase.Input{Repo: mb.Repo, Issue: mb.Number, Type: mb.Type, Decisions: mb.Data.Decisions,
		FreeText: mb.Data.FreeText, Plan: mb.Data.Plan, Attempt: 1}
	switch state {
	case StateFunctionalAnalysis:
		in.Phase, in.Step = phase.Analysis, phase.StepFunctional
	case StateTechnicalAnalysis:
		in.Phase, in.Step = phase.Analysis, phase.StepTechnical
	case StateInDevelopment:
		in.Phase = phase.Development
	case StateCIFix:
		in.Phase, in.CILog = phase.CIFix, mb.Data.CILog
	case StateAnswering:
		in.Phase = phase.Answer
	}
	in.Key = phase.KeyOf(in.Phase, in.Step)

	issue, err := bot.Forge.Issue(ctx, mb.Ref())
	if err != nil {
		return fmt.Errorf("read issue: %w", err)
	}
	if issue.State == "closed" {
		_, err := m.done(ctx, bot, mb, "the issue was closed")
		return err
	}
	in.Title, in.Description = issue.Title, issue.Body
	if fa, ok := Section(issue.Body, sectionFunctional); ok {
		in.Analysis = fa
	}
	// The branch (and with it the session name) is frozen at the first run of the mailbox.
	if mb.Branch == "" {
		mb.Branch = BranchName(m.cfg.BranchPrefix, mb.Number, issue.Title)
	}
	in.Branch = mb.Branch
	repo, err := bot.Forge.Repository(ctx, mb.Repo)
	if err != nil {
		return fmt.Errorf("read repository: %w", err)
	}
	if err := m.setState(ctx, bot, mb, state); err != nil {
		return err
	}
	// Due again at once if this process dies during the run: the next lease holder redoes it.
	now := m.now()
	mb.WakeAt = &now
	if err := m.store.Save(ctx, nil, mb); err != nil {
		return err
	}

	// A run finished by recovery after a restart and not yet acted on is applied instead of
	// starting a new one.
	if applied, err := m.applyRecovered(ctx, bot, mb, state, in, repo); applied || err != nil {
		return err
	}
	run := &Run{MailboxID: mb.ID, Phase: string(in.Phase), Step: string(in.Step)}
	if err := m.store.StartRun(ctx, run); err != nil {
		return err
	}
	in.Attempt = run.Attempt
	job := phase.Job{MailboxID: mb.ID, RunID: run.ID, Attempt: run.Attempt, ForgeName: mb.Forge,
		Repository: *repo, Branch: mb.Branch, Input: in, Push: !in.Phase.ReadOnly(),
		CommitMessage: fmt.Sprintf("%s for #%d: %s", in.Phase, mb.Number, issue.Title)}
	if !mb.MergeRequest && (m.cfg.SessionResume == nil || m.cfg.SessionResume(mb.Repo)) {
		job.SessionName = mb.Branch // the session is named after the branch, frozen with it
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go m.watchCancel(runCtx, stop, bot, mb)
	m.log.Info("run started", "mailbox_id", mb.ID, "phase", in.Phase, "step", in.Step, "attempt", run.Attempt)
	out, err := m.exec.Execute(runCtx, job)
	if err != nil {
		run.Status, run.Outcome = RunInterrupted, "infrastructure error: "+err.Error()
		_ = m.store.FinishRun(context.WithoutCancel(ctx), run)
		return fmt.Errorf("execute %s: %w", in.Key, err)
	}
	code := out.ExitCode
	run.ExitCode, run.Container, run.Output = &code, out.Container, out.Output
	if out.Result != nil {
		b, _ := json.Marshal(out.Result)
		run.Result = string(b)
	}
	switch {
	case out.Interrupted:
		run.Status, run.Outcome = RunInterrupted, "interrupted"
	case out.Failure != "":
		run.Status, run.Outcome = RunFailed, out.Failure
	default:
		run.Status, run.Outcome = RunSucceeded, "ok"
	}
	if err := m.store.FinishRun(context.WithoutCancel(ctx), run); err != nil {
		return err
	}
	m.log.Info("run finished", "mailbox_id", mb.ID, "phase", in.Phase, "status", run.Status, "outcome", run.Outcome)
	if out.Interrupted {
		return nil // the cancelling event (or the next lease holder) decides what follows
	}
	if out.Failure != "" {
		mb.Data.Failures++
		reason := fmt.Sprintf("the %s run (attempt %d) failed: %s", in.Key, run.Attempt, out.Failure)
		return m.block(ctx, bot, mb, state, reason)
	}
	mb.Data.Failures = 0
	return m.applyResult(ctx, bot, mb, state, out, repo)
}

// watchCancel stops a running phase when an event that cancels it arrives.
func (m *Machine) watchCancel(ctx context.Context, stop func(), bot Bot, mb *Mailbox) {
	t := time.NewTicker(cancelPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		evs, err := m.store.PendingEvents(ctx, mb.ID)
		if err != nil {
			continue
		}
		for _, e := range evs {
			if cancels(e.Event, bot, mb) {
				m.log.Info("stopping the run: a cancelling event arrived", "mailbox_id", mb.ID, "event", e.Event.Type)
				stop()
				return
			}
		}
	}
}

// cancels reports whether ev ends the mailbox's work (so a running container is stopped).
func cancels(ev forge.Event, bot Bot, mb *Mailbox) bool {
	switch ev.Type {
	case forge.EventIssueClosed:
		return !ev.Target.MergeRequest
	case forge.EventMergeRequestClosed, forge.EventMergeRequestMerged:
		return ev.Target.MergeRequest && ev.Target.Number == mb.MRNumber
	case forge.EventAssignees:
		if ev.Target.MergeRequest || !ev.AssigneesKnown {
			return false
		}
		return !containsFold(ev.Assignees, bot.Login) && !strings.EqualFold(ev.Sender.Login, bot.Login)
	}
	return false
}

const sectionFunctional = "functional_analysis"

func (m *Machine) applyResult(ctx context.Context, bot Bot, mb *Mailbox, state State, out *phase.Outcome, repo *forge.Repository) error {
	r := out.Result
	switch state {
	case StateFunctionalAnalysis:
		mb.Data.Analysis = r
		if len(r.Questions) > 0 {
			intro := strings.TrimSpace(r.Understanding)
			if intro != "" {
				intro = "Here is how I understand the issue:\n\n> " + strings.ReplaceAll(intro, "\n", "\n> ") + "\n\n"
			}
			intro += "Before I go on, I need a few decisions from you."
			if err := m.ask(ctx, bot, mb, StateWaitingInfo, intro, r.Questions); err != nil {
				return err
			}
			mb.Data.AnalysisRound = mb.Data.Round
			return nil
		}
		return m.finishFunctional(ctx, bot, mb)

	case StateTechnicalAnalysis:
		mb.Data.Plan = r.Plan
		body := fmt.Sprintf("## Technical plan\n\n%s\n\nAdd the `%s` label to let me start the development.",
			strings.TrimSpace(r.Plan), m.cfg.Labels.ValidatePlan)
		if err := m.post(ctx, bot, mb, fmt.Sprintf("plan-%d", mb.Data.Round), "plan", body); err != nil {
			return err
		}
		return m.setState(ctx, bot, mb, StateWaitingValidation)

	case StateAnswering:
		if err := m.post(ctx, bot, mb, fmt.Sprintf("answer-%d", mb.Data.Round), "answer", strings.TrimSpace(r.Answer)); err != nil {
			return err
		}
		return m.setState(ctx, bot, mb, StateInReview)

	case StateInDevelopment, StateCIFix:
		if out.HeadSHA == "" {
			return m.block(ctx, bot, mb, state, fmt.Sprintf("the %s run changed no file, so there is nothing to push.", phaseOf(state)))
		}
		mb.HeadSHA = out.HeadSHA
		if mb.MRNumber == 0 {
			body := fmt.Sprintf("Closes #%d\n\n%s", mb.Number, m.cfg.Redact(strings.TrimSpace(r.Summary)))
			mr, err := bot.Forge.CreateMergeRequest(ctx, mb.Repo, forge.NewMergeRequest{
				SourceBranch: mb.Branch, TargetBranch: repo.DefaultBranch, Title: mb.Title, Body: body})
			if err != nil {
				return fmt.Errorf("open the merge request: %w", err)
			}
			mb.MRNumber = mr.Number
			msg := fmt.Sprintf("I opened %s from `%s`.", m.mrRef(bot, mr.Number), mb.Branch)
			if mr.WebURL != "" {
				msg += " " + mr.WebURL
			}
			if err := m.post(ctx, bot, mb, fmt.Sprintf("mr-%d", mb.Data.Round), "merge_request", msg); err != nil {
				return err
			}
		} else {
			msg := fmt.Sprintf("I pushed a fix for the failed CI (attempt %d of %d) as %s.",
				mb.Data.CIAttempts, m.cfg.CIFixAttempts, out.HeadSHA[:min(7, len(out.HeadSHA))])
			if err := m.post(ctx, bot, mb, "cifix-"+out.HeadSHA, "ci_fix", msg); err != nil {
				return err
			}
		}
		mb.Data.CIWaitUntil = m.now().Add(m.cfg.CIWait)
		return m.setState(ctx, bot, mb, StateInCI)
	}
	return nil
}

// finishFunctional writes the functional analysis into the issue description and moves on:
// an analysis is then ready for review, other types go to the technical analysis.
func (m *Machine) finishFunctional(ctx context.Context, bot Bot, mb *Mailbox) error {
	issue, err := bot.Forge.Issue(ctx, mb.Ref())
	if err != nil {
		return fmt.Errorf("read issue: %w", err)
	}
	var qs []Question
	if mb.Data.AnalysisRound != 0 {
		if qs, err = m.store.Questions(ctx, mb.ID, mb.Data.AnalysisRound); err != nil {
			return err
		}
	}
	content := RenderAnalysis(mb.Data.Analysis, qs, mb.Data.FreeText)
	body := SetSection(issue.Body, sectionFunctional, content)
	if body != issue.Body {
		if err := bot.Forge.SetIssueBody(ctx, mb.Ref(), body); err != nil {
			return fmt.Errorf("write the functional analysis: %w", err)
		}
	}
	if mb.Type == "analysis" {
		msg := "The analysis is in the issue description, under **Functional analysis**. It is ready for review."
		if err := m.post(ctx, bot, mb, fmt.Sprintf("analysis-%d", mb.Data.Round), "analysis", msg); err != nil {
			return err
		}
		return m.setState(ctx, bot, mb, StateInReview)
	}
	return m.setState(ctx, bot, mb, StateTechnicalAnalysis)
}

// RenderAnalysis renders the "Functional analysis" section of the description:
// understanding, a table of decisions, expected behaviour, acceptance criteria, out of scope.
func RenderAnalysis(r *phase.Result, qs []Question, freeText string) string {
	if r == nil {
		r = &phase.Result{}
	}
	var b strings.Builder
	b.WriteString("## Functional analysis\n\n")
	if u := strings.TrimSpace(r.Understanding); u != "" {
		b.WriteString("### Understanding\n\n" + u + "\n\n")
	}
	if len(qs) > 0 {
		b.WriteString("### Decisions\n\n| Question | Decision | Decided by |\n|---|---|---|\n")
		for _, q := range qs {
			by := deref(q.AnsweredBy)
			switch by {
			case "default", "":
				by = "default"
			default:
				by = "@" + by
			}
			fmt.Fprintf(&b, "| %s. %s | %s | %s |\n", q.QID, cell(q.Title), cell(optionText(q, deref(q.Answer))), by)
		}
		b.WriteString("\n")
	}
	if f := strings.TrimSpace(freeText); f != "" {
		b.WriteString("### Notes from the discussion\n\n" + f + "\n\n")
	}
	if e := strings.TrimSpace(r.ExpectedBehaviour); e != "" {
		b.WriteString("### Expected behaviour\n\n" + e + "\n\n")
	}
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		b.WriteString("### " + title + "\n\n")
		for _, it := range items {
			b.WriteString("- " + strings.TrimSpace(it) + "\n")
		}
		b.WriteString("\n")
	}
	list("Acceptance criteria", r.AcceptanceCriteria)
	list("Out of scope", r.OutOfScope)
	return strings.TrimSpace(b.String())
}

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
