package mailbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// jobUsage is a UsageReader over the jobs scriptedJobs ran: each run reported cost, as a
// claude-code run does.
type jobUsage struct {
	exec *scriptedJobs
	cost float64
	// unrated runs come first, as runs of an adapter that reports no cost.
	unrated int
}

func (u jobUsage) Usage(_ context.Context, mailboxID int64) ([]mailbox.ProgressRun, error) {
	u.exec.mu.Lock()
	defer u.exec.mu.Unlock()
	var out []mailbox.ProgressRun
	for range u.unrated {
		out = append(out, mailbox.ProgressRun{Phase: "analysis", Duration: 10 * time.Second})
	}
	for _, j := range u.exec.jobs {
		if j.MailboxID == mailboxID {
			out = append(out, mailbox.ProgressRun{Phase: string(j.Input.Phase), Duration: 30 * time.Second,
				TokensIn: 1000, TokensOut: 100, CostUSD: u.cost, Rated: true})
		}
	}
	return out, nil
}

// A budget of 0.01 lets the first run start and blocks the second, saying why; ai::retry_once
// allows one more run, then the budget blocks again.
func TestBudgetBlocksTheSecondRun(t *testing.T) {
	t.Parallel()
	budget := 0.01
	var b *bundle
	usage := &jobUsage{cost: 0.0123}
	b = setupWith(t, guard{config: mailbox.Config{Usage: usage,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{BudgetUSD: &budget} }}}, "type::task")
	usage.exec = b.exec

	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the first run started: nothing was spent before it")
	require.Len(t, b.exec.jobs, 1)

	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, []string{"status::blocked"}, b.status())
	require.Len(t, b.exec.jobs, 1, "the second run did not start")
	blocked := strings.Join(b.comments(), "\n---\n")
	require.Contains(t, blocked, "the cost so far ($0.0123) has reached this issue's budget ($0.01, budget_usd)")
	require.Contains(t, blocked, "Add the ai::retry_once label to allow one more run")
	status := statusComment(t, b)
	require.Contains(t, status, "**Blocked:** the cost so far ($0.0123)")
	require.Contains(t, status, "| analysis | 1 | 30s | 1000 | 100 | $0.0123 |")

	// alice allows one more run: the technical analysis runs, and the label is gone.
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::retry_once")})
	mb = b.advance()
	require.Len(t, b.exec.jobs, 2)
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::retry_once")
	require.False(t, mb.Data.RetryOnce, "the permission is used up")

	// The development would start past the budget: blocked again.
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Len(t, b.exec.jobs, 2)
	require.Contains(t, statusComment(t, b), "($0.0246) has reached")
	b.requireUniqueMarkers()
}

func statusComment(t *testing.T, b *bundle) string {
	t.Helper()
	for _, c := range b.comments() {
		if k, _, ok := mailbox.ParseMarker(c); ok && k == mailbox.ProgressKey {
			return c
		}
	}
	t.Fatalf("no status comment in:\n%s", strings.Join(b.comments(), "\n---\n"))
	return ""
}

// The budget's block comment and the status comment say that unrated runs are not in the sum,
// rather than counting their unknown cost as 0 silently.
func TestBudgetBlockSaysUnratedRunsAreNotCounted(t *testing.T) {
	t.Parallel()
	budget := 0.01
	usage := &jobUsage{cost: 0.0123, unrated: 2}
	b := setupWith(t, guard{config: mailbox.Config{Usage: usage,
		Settings: func(string) mailbox.Settings { return mailbox.Settings{BudgetUSD: &budget} }}}, "type::task")
	usage.exec = b.exec

	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	blocked := strings.Join(b.comments(), "\n---\n")
	require.Contains(t, blocked, "the cost so far ($0.0123 + 2 unrated runs) has reached this issue's budget ($0.01, budget_usd)")
	require.Contains(t, blocked, "Unrated runs are not in the sum")
	require.Contains(t, statusComment(t, b), "spent $0.0123 + 2 unrated runs (an unrated run's cost is unknown and not counted)")
	b.requireUniqueMarkers()
}
