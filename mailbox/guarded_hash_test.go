package mailbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
)

// The question block holds what the post guard changes before sending (an image made inert, a
// mass mention and a bot's mention quoted): the hash Alfred records is that of the text the
// forge holds, so reconciliation does not read the block as edited by the author, which would
// answer every question with its default in the author's name.
func TestReconcileKeepsQuestionsOpenWhenTheBlockIsGuarded(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	b := setupWith(t, guard{
		limits: &mailbox.PostLimits{},
		store:  func(now func() time.Time) storetest.Store { return postgres.New(db, now) },
	}, "type::task")
	b.fake.SetClock(b.clock.Now())
	r := b.exec.results["analysis.functional"]
	r.Questions[0].Context = "As in the mockup: ![mockup](https://example.com/mockup.png), cc @all and @renovate-bot"
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)

	require.Contains(t, strings.Join(b.comments(), "\n"), `!\[mockup]`, "the guard made the image inert")

	b.clock.Add(2 * time.Minute)
	b.fake.SetClock(b.clock.Now())
	require.Zero(t, b.reconcile().Events, "Alfred's own guarded block is not an edit")
	for range 2 {
		mb = b.advance()
	}
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "nobody answered: decisions %v", mb.Data.Decisions)
	require.Empty(t, mb.Data.Decisions)
}
