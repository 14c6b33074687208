package mailbox

import (
	"fmt"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/internal/base/cost"
)

// ProgressKey is the comment key of the status comment: one per mailbox, edited in place.
const ProgressKey = "status"

// Progress is what the status comment of an issue shows: the phase running or queued, the
// elapsed time, and tokens and cost per phase and in total, from the mailbox's llm_sessions.
type Progress struct {
	// Phase is the phase running, or queued when Running is false; "" when none is.
	Phase   string
	Running bool
	// Since is when Phase started running or was queued.
	Since time.Time
	// Started is when the mailbox's first run started; zero before it.
	Started time.Time
	// Now is the time of rendering.
	Now time.Time
	// Runs are the finished runs, oldest first.
	Runs []ProgressRun
	// BudgetUSD is the budget; nil when it has none.
	BudgetUSD *float64
	// Blocked is the reason work stopped ("budget"), "" when not blocked.
	Blocked string
	// Done is true once the lifecycle ended.
	Done bool
	// AutoMergeWaits is what auto-merge waits for ("CI to be green on abc1234"), "" when it is
	// off or waits for nothing.
	AutoMergeWaits string
}

// ProgressRun is one run's share of the use.
type ProgressRun struct {
	Phase    string
	Duration time.Duration
	// TokensIn and TokensOut are the run's own tokens.
	TokensIn, TokensOut int64
	// CostUSD is the run's cost; Rated is false when its adapter reported none.
	CostUSD float64
	Rated   bool
}

// Spent is the cost reported so far and how many runs are unrated (their cost unknown, not
// in usd).
func (p Progress) Spent() (usd float64, unrated int) {
	for _, r := range p.Runs {
		if r.Rated {
			usd += r.CostUSD
		} else {
			unrated++
		}
	}
	return usd, unrated
}

type phaseUse struct {
	phase     string
	runs      int
	dur       time.Duration
	in, out   int64
	usd       float64
	unrated   int
	lastRated bool
}

// RenderProgress renders the status comment body (without its marker). A cost is "unrated"
// when no run of the row reported one, never "free": the adapters of Codex, Gemini and
// Copilot report none.
func RenderProgress(p Progress) string {
	var b strings.Builder
	b.WriteString("### Alfred status\n\n")
	switch {
	case p.Done && !p.Started.IsZero():
		fmt.Fprintf(&b, "**Finished**, %s after the first run started.", elapsed(p.Now, p.Started))
	case p.Done:
		b.WriteString("**Finished.**")
	case p.Blocked != "":
		b.WriteString("**Blocked:** " + p.Blocked)
	case p.Phase != "" && p.Running:
		fmt.Fprintf(&b, "**Running:** %s for %s", p.Phase, elapsed(p.Now, p.Since))
	case p.Phase != "":
		fmt.Fprintf(&b, "**Queued:** %s, waiting %s", p.Phase, elapsed(p.Now, p.Since))
	case p.AutoMergeWaits != "":
		b.WriteString("**Auto-merge waits** for " + p.AutoMergeWaits + ".")
	default:
		b.WriteString("**Waiting** for the next event.")
	}
	if !p.Started.IsZero() && !p.Done {
		fmt.Fprintf(&b, " · %s since the first run", elapsed(p.Now, p.Started))
	}
	b.WriteString("\n\n")
	if len(p.Runs) == 0 {
		b.WriteString("No run has finished yet.\n")
		writeBudget(&b, p)
		return b.String()
	}
	var rows []*phaseUse
	byPhase := map[string]*phaseUse{}
	total := &phaseUse{phase: "**Total**"}
	for _, r := range p.Runs {
		u := byPhase[r.Phase]
		if u == nil {
			u = &phaseUse{phase: r.Phase}
			byPhase[r.Phase] = u
			rows = append(rows, u)
		}
		for _, x := range []*phaseUse{u, total} {
			x.runs++
			x.dur += r.Duration
			x.in += r.TokensIn
			x.out += r.TokensOut
			if r.Rated {
				x.usd += r.CostUSD
			} else {
				x.unrated++
			}
		}
	}
	b.WriteString("| phase | runs | time | tokens in | tokens out | cost |\n|---|---:|---:|---:|---:|---:|\n")
	for _, u := range append(rows, total) {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %s |\n", u.phase, u.runs, u.dur.Round(time.Second), u.in, u.out,
			costWords(u.usd, u.unrated, u.runs))
	}
	writeBudget(&b, p)
	return b.String()
}

func writeBudget(b *strings.Builder, p Progress) {
	if p.BudgetUSD == nil {
		return
	}
	usd, unrated := p.Spent()
	fmt.Fprintf(b, "\nBudget: $%.2f, spent %s", *p.BudgetUSD, cost.Words(usd, unrated))
	if unrated > 0 {
		b.WriteString(" (an unrated run's cost is unknown and not counted)")
	}
	b.WriteString(".\n")
}

// costWords is a row's cost: "unrated" when no run of the row reported one, else cost.Words.
func costWords(usd float64, unrated, runs int) string {
	if unrated == runs {
		return "unrated"
	}
	return cost.Words(usd, unrated)
}

// elapsed is the time from since to now for a headline: whole seconds under a minute ("0s",
// "42s"), whole minutes under an hour ("1m", "59m"), hours and minutes beyond ("1h", "1h5m",
// "25h"). A zero since, or one after now, is "0s".
func elapsed(now, since time.Time) string {
	if since.IsZero() || now.Before(since) {
		return "0s"
	}
	return shortDuration(now.Sub(since))
}

// shortDuration formats d as elapsed does, rounded to the second below a minute and to the
// minute from a minute on.
func shortDuration(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	m := int64(d.Round(time.Minute) / time.Minute)
	switch {
	case m < 60:
		return fmt.Sprintf("%dm", m)
	case m%60 == 0:
		return fmt.Sprintf("%dh", m/60)
	}
	return fmt.Sprintf("%dh%dm", m/60, m%60)
}

// Budget decides whether the next run may start. spentUSD is the cost reported so far, unrated
// the runs whose adapter reported none (their cost is unknown, so not in spentUSD); budget nil
// means none. A run may start while spentUSD is below the budget; past it, only when retryOnce
// is set (the ai::retry_once label, which allows one more run). The reason says, for an issue
// comment, why work stopped, and that unrated runs are not in the sum; it is "" when the run
// may start.
func Budget(spentUSD float64, unrated int, budget *float64, retryOnce bool) (ok bool, reason string) {
	if budget == nil || spentUSD < *budget || retryOnce {
		return true, ""
	}
	reason = fmt.Sprintf("the cost so far (%s) has reached this issue's budget ($%.2f, budget_usd). ",
		cost.Words(spentUSD, unrated), *budget)
	if unrated > 0 {
		reason += "Unrated runs are not in the sum: their adapter reported no cost, so the issue may have cost more. "
	}
	return false, reason + "Add the ai::retry_once label to allow one more run, or raise budget_usd for this project."
}
