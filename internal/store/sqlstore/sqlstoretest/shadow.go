package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/storetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// shadowWrites: the writes of shadow mode are kept in order per target, with their lists and
// details, attached to the target's mailbox (none for a repository's write), the latest edit of
// each comment only, and the mailbox's page lists them.
func shadowWrites(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	id := deliverOn(t, s, 1)
	ref := forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1}

	first, err := s.RecordShadow(ctx, mailbox.ShadowWrite{Target: ref, Kind: mailbox.ShadowComment,
		Body: "<!-- alfred:key=ack:kind=ack -->\nThanks @alice, I am on it."})
	require.NoError(t, err)
	require.Positive(t, first)
	c.Add(time.Second)
	_, err = s.RecordShadow(ctx, mailbox.ShadowWrite{Target: ref, Kind: mailbox.ShadowLabels,
		Add: []string{"status::waiting_info"}, Remove: []string{"status::done"}})
	require.NoError(t, err)
	_, err = s.RecordShadow(ctx, mailbox.ShadowWrite{Target: ref, Kind: mailbox.ShadowEditComment, CommentID: 42, Body: "a forge comment"})
	require.NoError(t, err)
	for _, body := range []string{"edited once", "edited twice", "edited"} {
		_, err = s.RecordShadow(ctx, mailbox.ShadowWrite{Target: ref, Kind: mailbox.ShadowEditComment, CommentID: -first, Body: body})
		require.NoError(t, err)
	}
	_, err = s.RecordShadow(ctx, mailbox.ShadowWrite{Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop"},
		Kind: mailbox.ShadowEnsureLabels, Add: []string{"status::done"}})
	require.NoError(t, err, "a repository's write has no mailbox")
	other := forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1, MergeRequest: true}
	_, err = s.RecordShadow(ctx, mailbox.ShadowWrite{Target: other, Kind: mailbox.ShadowReview, Body: "Looks good.",
		Detail: map[string]string{"event": "comment"}})
	require.NoError(t, err)

	ws, err := s.ShadowWrites(ctx, ref)
	require.NoError(t, err)
	require.Len(t, ws, 4, "the issue's writes only, the latest edit of each comment")
	require.Equal(t, int64(42), ws[2].CommentID, "another comment's edit is kept")
	ws = append(ws[:2], ws[3:]...)
	require.Equal(t, "edited", ws[2].Body, "the latest edit")
	require.Equal(t, mailbox.ShadowComment, ws[0].Kind)
	require.Equal(t, ref, ws[0].Target)
	require.True(t, ws[0].At.Equal(c.Now().Add(-time.Second)), "stamped with the store's clock")
	require.Equal(t, []string{"status::waiting_info"}, ws[1].Add)
	require.Equal(t, []string{"status::done"}, ws[1].Remove)
	require.Nil(t, ws[1].Detail)
	require.Equal(t, -first, ws[2].CommentID)
	require.Less(t, ws[0].ID, ws[1].ID)

	mrs, err := s.ShadowWrites(ctx, other)
	require.NoError(t, err)
	require.Len(t, mrs, 1, "a merge request with the issue's number is another target")
	require.Equal(t, "comment", mrs[0].Detail["event"])

	d, err := s.Mailbox(ctx, id)
	require.NoError(t, err)
	require.Len(t, d.Shadow, 4)
	require.Equal(t, 4, d.ShadowWrites)
	d.Shadow = append(d.Shadow[:2], d.Shadow[3:]...)
	list, err := s.Mailboxes(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, 4, list[0].ShadowWrites, "the list says which mailboxes are in shadow")
	require.Equal(t, "comment", d.Shadow[0].Kind)
	require.Contains(t, d.Shadow[0].Body, "Thanks @alice")
	require.Equal(t, -first, d.Shadow[0].CommentID, "a posted comment shows its synthetic id, the one its edits name")
	require.Equal(t, d.Shadow[0].CommentID, d.Shadow[2].CommentID)
	require.Equal(t, "would add the labels status::waiting_info and remove the labels status::done", d.Shadow[1].Summary())

	// The held auto-merge targets the bot's own merge request, which has no mailbox of its own:
	// it is shown on the page of the issue whose merge request it is.
	mb, err := s.Get(ctx, id)
	require.NoError(t, err)
	mb.MRNumber = 7
	require.NoError(t, s.SaveProcessed(ctx, mb, nil))
	_, err = s.RecordShadow(ctx, mailbox.ShadowWrite{Target: forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 7, MergeRequest: true},
		Kind: mailbox.ShadowMerge, Detail: map[string]string{"method": "merge", "head_sha": "abc"}})
	require.NoError(t, err)
	d, err = s.Mailbox(ctx, id)
	require.NoError(t, err)
	require.Len(t, d.Shadow, 5, "the held merge is on the issue's page")
	require.Equal(t, "would merge the merge request (merge)", d.Shadow[4].Summary())
}
