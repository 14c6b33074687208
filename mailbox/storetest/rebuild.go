package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
)

// rebuildCreatesOnce: a rebuilt mailbox is stored with its comments, questions and times,
// due and unleased; a second rebuild of the same issue stores nothing; Empty tells a store
// without mailboxes.
func rebuildCreatesOnce(t *testing.T, s Store, c *Clock) {
	ctx := context.Background()
	empty, err := s.Empty(ctx)
	require.NoError(t, err)
	require.True(t, empty)

	now := c.Now()
	since := now.Add(-time.Hour)
	deadline := now.Add(24 * time.Hour).Truncate(time.Minute)
	rb := &mailbox.Rebuilt{
		Mailbox: mailbox.Mailbox{Forge: "gl", Repo: "acme/shop", Number: 7, State: mailbox.StateWaitingInfo, Type: "task",
			Author: "alice", Title: "Export", Labels: mailbox.StringList{"status::waiting_info", "type::task"},
			Assignees: mailbox.StringList{"alfred", "alice"}, Data: mailbox.Data{Round: 2, AnalysisRound: 2, Acknowledged: true},
			WakeAt: &now, Reconciled: mailbox.Reconciled{CommentsSince: &since}},
		Comments: []mailbox.PostedComment{{Key: "ack-1", Kind: "ack", CommentID: 11, BodyHash: "a"},
			{Key: "questions-2", Kind: "questions", CommentID: 12, BodyHash: "q"}},
		Questions: []mailbox.Question{{Round: 2, QID: "q1", Title: "Separator?", OptionsJSON: `[{"id":"Comma","label":"Comma"}]`,
			Default: "Comma", DeadlineAt: deadline}},
	}
	created, err := s.Rebuild(ctx, rb)
	require.NoError(t, err)
	require.True(t, created)
	require.NotZero(t, rb.Mailbox.ID)
	empty, err = s.Empty(ctx)
	require.NoError(t, err)
	require.False(t, empty)

	mb, err := s.Find(ctx, issue(7))
	require.NoError(t, err)
	require.Equal(t, rb.Mailbox.ID, mb.ID)
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Equal(t, 2, mb.Data.AnalysisRound)
	require.Equal(t, []string{"alfred", "alice"}, []string(mb.Assignees))
	require.Nil(t, mb.LeaseOwner)
	require.Nil(t, mb.ReconciledAt)
	require.NotNil(t, mb.CommentsSince)
	require.True(t, since.Equal(*mb.CommentsSince))
	pc, err := s.PostedComment(ctx, mb.ID, "questions-2")
	require.NoError(t, err)
	require.Equal(t, mailbox.PostedComment{MailboxID: mb.ID, Key: "questions-2", Kind: "questions", CommentID: 12, BodyHash: "q"}, *pc)
	qs, err := s.Questions(ctx, mb.ID, 2)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, "Comma", qs[0].Default)
	require.True(t, deadline.Equal(qs[0].DeadlineAt))
	require.Nil(t, qs[0].Answer)

	got, err := s.Lease(ctx, "w", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, got, "a rebuilt mailbox is due at once")
	require.Equal(t, mb.ID, got.ID)

	again := *rb
	again.Mailbox.ID = 0
	created, err = s.Rebuild(ctx, &again)
	require.NoError(t, err)
	require.False(t, created, "an issue with a mailbox is not rebuilt")

	// Store first (issue 25): a delivery stored while the rebuild runs made an idle mailbox;
	// the rebuild takes it over, with its pending event, instead of skipping the issue.
	dup, err := s.Deliver(ctx, Event(8, "during-rebuild", "x"))
	require.NoError(t, err)
	require.False(t, dup)
	idle, err := s.Find(ctx, issue(8))
	require.NoError(t, err)
	require.Equal(t, mailbox.StateIdle, idle.State)
	rb8 := &mailbox.Rebuilt{Mailbox: mailbox.Mailbox{Forge: "gl", Repo: "acme/shop", Number: 8, State: mailbox.StateInCI,
		Branch: "agent/issue-8", MRNumber: 80, WakeAt: &now}}
	created, err = s.Rebuild(ctx, rb8)
	require.NoError(t, err)
	require.True(t, created, "an idle mailbox made by a delivery is taken over")
	require.Equal(t, idle.ID, rb8.Mailbox.ID)
	got8, err := s.Find(ctx, issue(8))
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, got8.State)
	require.Equal(t, int64(80), got8.MRNumber)
	pending, err := s.PendingEvents(ctx, idle.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the delivery waits to be applied after the rebuild")

	// An idle mailbox a worker holds (a rebuild beside a running Alfred) is that worker's: it
	// is not taken over. Once the lease has expired, it is, and its lease is cleared.
	_, err = s.Deliver(ctx, Event(9, "held-during-rebuild", "y"))
	require.NoError(t, err)
	idle9, err := s.Find(ctx, issue(9))
	require.NoError(t, err)
	held, err := s.Claim(ctx, idle9.ID, "worker/1", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, held)
	rb9 := func() *mailbox.Rebuilt {
		return &mailbox.Rebuilt{Mailbox: mailbox.Mailbox{Forge: "gl", Repo: "acme/shop", Number: 9, State: mailbox.StateInCI, WakeAt: &now}}
	}
	created, err = s.Rebuild(ctx, rb9())
	require.NoError(t, err)
	require.False(t, created, "a held mailbox is its worker's")
	got9, err := s.Find(ctx, issue(9))
	require.NoError(t, err)
	require.Equal(t, mailbox.StateIdle, got9.State)
	c.Add(2 * time.Minute)
	created, err = s.Rebuild(ctx, rb9())
	require.NoError(t, err)
	require.True(t, created, "an expired lease does not hold it")
	got9, err = s.Find(ctx, issue(9))
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, got9.State)
	require.Nil(t, got9.LeaseOwner)
}

// emptyUntilWorkedOn: deliveries waiting in idle mailboxes leave the store empty (a start-up
// rebuild stopped while it waited for the forge is done again at the next start); an event
// applied, or a mailbox past idle, makes it not empty.
func emptyUntilWorkedOn(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	deliverOn(t, s, 1)
	deliverOn(t, s, 2)
	empty, err := s.Empty(ctx)
	require.NoError(t, err)
	require.True(t, empty, "only deliveries that wait")

	Settled(t, s, 3, func(*mailbox.Mailbox) {}) // idle, its event applied
	empty, err = s.Empty(ctx)
	require.NoError(t, err)
	require.False(t, empty, "an event was applied")
}

// emptyUntilWorkedOnByState: a mailbox past idle makes the store not empty.
func emptyUntilWorkedOnByState(t *testing.T, s Store, _ *Clock) {
	ctx := context.Background()
	deliverOn(t, s, 1)
	created, err := s.Rebuild(ctx, &mailbox.Rebuilt{Mailbox: mailbox.Mailbox{Forge: "gl", Repo: "acme/shop", Number: 4,
		State: mailbox.StateWaitingValidation, Author: "alice", Data: mailbox.Data{Round: 1, Acknowledged: true}}})
	require.NoError(t, err)
	require.True(t, created)
	empty, err := s.Empty(ctx)
	require.NoError(t, err)
	require.False(t, empty, "a mailbox past idle")
}
