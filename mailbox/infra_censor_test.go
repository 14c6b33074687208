package mailbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

// errInfra is the runner failing for a reason of Alfred's (the engine, git, the store), with a
// secret in its words.
type errInfra struct{ *scriptedJobs }

func (e errInfra) Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error) {
	_, _ = e.scriptedJobs.Execute(ctx, job)
	return nil, fmt.Errorf("prepare worktree: dial docker with tok-s3cr3t: connection refused")
}

// The outcome a run's record keeps (the mailbox page's timeline and the run page show it) is
// censored like every other text Alfred keeps: an infrastructure error too.
func TestInfrastructureErrorOfARunIsStoredCensored(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	m := mailbox.NewMachine(mailbox.Config{Redact: func(s string) string {
		return strings.ReplaceAll(s, "tok-s3cr3t", "[redacted]")
	}}, b.store, b.bots, errInfra{b.exec}, b.clock.Now, b.log)
	b.deliver(assign("alice"))
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Error(t, m.Advance(context.Background(), mb))
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	require.NotEmpty(t, runs)
	require.NotContains(t, runs[len(runs)-1].Outcome, "tok-s3cr3t")
	require.Contains(t, runs[len(runs)-1].Outcome, "dial docker with [redacted]")
}
