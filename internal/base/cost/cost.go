// Package cost words a sum of run costs the same way wherever Alfred shows one: the status
// comment and the budget's reason (mailbox), the operator pages (internal/web).
package cost

import "fmt"

// Words formats a sum of costs in US dollars with the runs it leaves out because their cost is
// unknown (unrated: the adapter reported none): "$0.0123", "$0.0123 + 1 unrated run", "2
// unrated runs" — never "free" or "$0.0000" for a sum that has unrated runs.
func Words(usd float64, unrated int) string {
	runs := "runs"
	if unrated == 1 {
		runs = "run"
	}
	switch {
	case unrated == 0:
		return fmt.Sprintf("$%.4f", usd)
	case usd == 0:
		return fmt.Sprintf("%d unrated %s", unrated, runs)
	}
	return fmt.Sprintf("$%.4f + %d unrated %s", usd, unrated, runs)
}
