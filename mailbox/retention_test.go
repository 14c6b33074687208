package mailbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
)

// retentionStore records what the sweep asked for and purged.
type retentionStore struct {
	before time.Time
	list   []mailbox.ClosedMailbox
	purged []int64
}

func (s *retentionStore) Purgeable(_ context.Context, before time.Time) ([]mailbox.ClosedMailbox, error) {
	s.before = before
	return s.list, nil
}

func (s *retentionStore) Purge(_ context.Context, id int64) error {
	s.purged = append(s.purged, id)
	return nil
}

// The sweep asks the store only for the mailboxes closed before the shortest retention
// (MinDays), and purges those past their own project's retention.
func TestRetentionAsksForTheShortestRetentionOnly(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	st := &retentionStore{list: []mailbox.ClosedMailbox{
		{ID: 1, Repo: "acme/short", ClosedAt: now.Add(-8 * 24 * time.Hour)},
		{ID: 2, Repo: "acme/long", ClosedAt: now.Add(-8 * 24 * time.Hour)},
		{ID: 3, Repo: "acme/long", ClosedAt: now.Add(-31 * 24 * time.Hour)},
		{ID: 4, Repo: "acme/kept", ClosedAt: now.Add(-400 * 24 * time.Hour)},
	}}
	days := map[string]int{"acme/short": 7, "acme/long": 30, "acme/kept": 0}
	r := &mailbox.Retention{Store: st, MinDays: 7, Now: func() time.Time { return now },
		Days: func(repo string) int { return days[repo] }}
	n, err := r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []int64{1, 3}, st.purged)
	require.Equal(t, now.Add(-7*24*time.Hour), st.before, "nothing closed since the shortest retention is asked for")

	st.purged = nil
	r.MinDays = 0
	_, err = r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, now, st.before, "without MinDays: every closed mailbox")
}

func TestMinRetentionDays(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		days []int
		want int
	}{
		{nil, 0},
		{[]int{0}, 0},
		{[]int{0, 0}, 0},
		{[]int{30}, 30},
		{[]int{0, 30, 7}, 7},
		{[]int{30, 0, 90}, 30},
	} {
		require.Equal(t, c.want, mailbox.MinRetentionDays(c.days...), "%v", c.days)
	}
}
