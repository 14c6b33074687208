package runner

import "github.com/alfred-bot/alfred/runner/phase"

// UsageDelta returns the tokens and cost that one run added, from its Result cur and the
// previous run's Result prev in the same session.
//
// When cumulative is false (the CLI reports each run on its own), it returns cur's counters
// unchanged. When cumulative is true (Capabilities.CumulativeUsage: the CLI reports totals for
// the whole session after a resume — Claude Code's total_cost_usd and modelUsage, Codex's
// turn.completed.usage; spec/agents.md, "Adapter notes" 6), it returns cur − prev.
//
// The difference is only meaningful inside one session, so cur's counters are returned unchanged
// when prev and cur name different sessions (a fresh session after a refused resume starts its
// counters again) or when any difference would be negative (counters restarted; never report a
// negative usage). Tokens are counts; cost is in US dollars.
func UsageDelta(prev, cur phase.Result, cumulative bool) (in, out int64, cost float64) {
	// The figures come from what the run printed: a negative one is forged or broken, and
	// counts as none reported (it would take from the budget what the run spent).
	cur.InputTokens, cur.OutputTokens, cur.CostUSD = max(cur.InputTokens, 0), max(cur.OutputTokens, 0), max(cur.CostUSD, 0)
	if !cumulative || prev.SessionID != cur.SessionID {
		return cur.InputTokens, cur.OutputTokens, cur.CostUSD
	}
	in, out, cost = cur.InputTokens-prev.InputTokens, cur.OutputTokens-prev.OutputTokens, cur.CostUSD-prev.CostUSD
	const eps = 1e-12 // float noise of repeated sums
	if in < 0 || out < 0 || cost < -eps {
		return cur.InputTokens, cur.OutputTokens, cur.CostUSD
	}
	if cost < 0 {
		cost = 0
	}
	return in, out, cost
}
