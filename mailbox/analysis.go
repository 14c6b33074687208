package mailbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/alfred-bot/alfred/runner/phase"
)

// sectionFunctional names the section of the issue description that holds the functional
// analysis (see SetSection).
const sectionFunctional = "functional_analysis"

// applyFunctional acts on a functional analysis: its questions are asked as a new round, or,
// without questions, the analysis is written into the description (finishFunctional).
func (m *Machine) applyFunctional(ctx context.Context, bot Bot, mb *Mailbox, r *phase.Result) error {
	mb.Data.Analysis = r
	if len(r.Questions) == 0 {
		return m.finishFunctional(ctx, bot, mb)
	}
	intro := strings.TrimSpace(r.Understanding)
	if intro != "" {
		intro = "Here is how I understand the issue:\n\n> " + strings.ReplaceAll(intro, "\n", "\n> ") + "\n\n"
	}
	intro += "Before I go on, I need a few decisions from you."
	if err := m.ask(ctx, bot, mb, onQuestions, intro, r.Questions); err != nil {
		return err
	}
	mb.Data.AnalysisRound = mb.Data.Round
	return nil
}

// finishFunctional writes the functional analysis into the issue description (or, when it
// does not fit, a comment: writeSection) and moves on: an analysis is then ready for review,
// other types go to the technical analysis.
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
	place, err := m.writeSection(ctx, bot, mb, issue, sectionFunctional, "Functional analysis", content)
	if err != nil {
		return fmt.Errorf("write the functional analysis: %w", err)
	}
	if mb.Type == "analysis" {
		msg := "The analysis is in the issue description, under **Functional analysis**. It is ready for review."
		if place == inComment {
			msg = "The analysis is in the **Functional analysis** comment above: the description cannot hold it. It is ready for review."
		}
		if err := m.post(ctx, bot, mb, fmt.Sprintf("analysis-%d", mb.Data.Round), "analysis", msg); err != nil {
			return err
		}
		return m.follow(ctx, bot, mb, onAnalysisDone)
	}
	return m.follow(ctx, bot, mb, onFunctional)
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
