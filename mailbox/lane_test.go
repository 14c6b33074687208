package mailbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
)

// An event worker starts a pass beside another only once that one has run for
// WorkerConfig.Overlap: with an hour, the second issue waits while the first issue's pass holds
// its run, and is acknowledged when it ends; with a millisecond, both passes hold their runs at
// once. (The workers run agents in their passes here, Runs: 0, so a held run holds a pass.)
func TestEventPassesStartBesideOnlyAfterTheOverlap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		overlap time.Duration
	}{{"an hour", time.Hour}, {"a millisecond", time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupPG(t)
			w, release := b.heldWorkersWith(t, mailbox.WorkerConfig{Count: 2, Overlap: tc.overlap})

			b.assignNew(t, "First long run")
			signal(t, "the first run started", func() bool { return b.runsStarted() == 1 })
			second := b.assignNew(t, "Second issue")
			if tc.overlap == time.Millisecond {
				signal(t, "the second run started beside the first", func() bool { return b.runsStarted() == 2 })
				return
			}
			signal(t, "a worker waiting to start a pass", func() bool { return w.PassesWaiting() == 1 })
			require.Equal(t, 1, b.runsStarted())
			require.Empty(t, b.commentsOf(second), "the second issue waits for the first pass")
			release()
			signal(t, "acknowledgement of the second issue", func() bool {
				return strings.Contains(b.commentsOf(second), "Thanks @alice, I am on it")
			})
		})
	}
}
