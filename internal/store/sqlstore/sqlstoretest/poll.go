package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// pollCursors: a forge never polled has the zero cursor; a failure keeps the cursor and is
// kept until a poll succeeds; each forge has its own; the issue mailbox of an issue and of the
// bot's merge request is found, someone else's merge request has none.
func pollCursors(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	cur, err := s.PollCursor(ctx, "gl")
	require.NoError(t, err)
	require.True(t, cur.Since.IsZero() && cur.PolledAt.IsZero() && cur.Error == "")

	since := time.Date(2026, 11, 29, 9, 59, 58, 0, time.UTC)
	require.NoError(t, s.SavePollCursor(ctx, "gl", since, c.Now()))
	c.Add(time.Minute)
	require.NoError(t, s.PollFailed(ctx, "gl", c.Now(), "forge: unavailable"))
	cur, err = s.PollCursor(ctx, "gl")
	require.NoError(t, err)
	require.True(t, since.Equal(cur.Since), "a failure keeps the cursor: %s", cur.Since)
	require.Equal(t, "forge: unavailable", cur.Error)
	require.True(t, c.Now().Equal(cur.FailedAt))

	next := since.Add(90 * time.Second)
	c.Add(time.Minute)
	require.NoError(t, s.SavePollCursor(ctx, "gl", next, c.Now()))
	cur, err = s.PollCursor(ctx, "gl")
	require.NoError(t, err)
	require.True(t, next.Equal(cur.Since))
	require.True(t, c.Now().Equal(cur.PolledAt))
	require.Empty(t, cur.Error, "a success clears the failure")
	require.True(t, cur.FailedAt.IsZero())

	other, err := s.PollCursor(ctx, "fj")
	require.NoError(t, err)
	require.True(t, other.Since.IsZero(), "each forge has its own cursor")

	issue := forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 3}
	_, err = s.Deliver(ctx, forge.Event{Forge: "gl", DeliveryID: "d1", BodyHash: "h1", Type: forge.EventComment, Target: issue})
	require.NoError(t, err)
	id, err := s.MailboxOf(ctx, issue)
	require.NoError(t, err)
	require.NotZero(t, id)
	mb, err := s.Get(ctx, id)
	require.NoError(t, err)
	mb.MRNumber, mb.Branch = 8, "agent/issue-3"
	require.NoError(t, s.Save(ctx, mb))
	got, err := s.MailboxOf(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 8, MergeRequest: true})
	require.NoError(t, err)
	require.Equal(t, id, got, "the bot's merge request leads to its issue")
	got, err = s.MailboxOf(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 9, MergeRequest: true})
	require.NoError(t, err)
	require.Zero(t, got)
	got, err = s.MailboxOf(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 4})
	require.NoError(t, err)
	require.Zero(t, got)
}
