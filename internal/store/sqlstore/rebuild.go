package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/mailbox"
)

// sqlAnyMailbox reads whether any mailbox went past idle, any event was applied or any comment
// recorded: one row of each at most.
const sqlAnyMailbox = `SELECT (SELECT count(*) FROM (SELECT 1 FROM mailboxes WHERE state <> 'idle' LIMIT 1) AS worked)
 + (SELECT count(*) FROM (SELECT 1 FROM events WHERE processed_at IS NOT NULL LIMIT 1) AS applied)
 + (SELECT count(*) FROM (SELECT 1 FROM comments LIMIT 1) AS posted)`

// Empty implements mailbox.Rebuilds.
func (s *Store) Empty(ctx context.Context) (bool, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, sqlAnyMailbox); err != nil {
		return false, fmt.Errorf("read whether any mailbox was worked on: %w", err)
	}
	return n == 0, nil
}

// sqlRebuildMailbox creates a rebuilt mailbox unless its issue has one that is not idle; no
// row when it has. An idle one (made by a delivery stored while the rebuild ran) is taken
// over, its pending events kept, unless a worker holds its lease (then it is that worker's);
// an expired lease is cleared. It is used for a rebuilt mailbox that is not idle itself. A
// new row is created in its rebuilt state ($5), so that the state changes a mailbox's timeline
// shows (migrations/0018_state_changes.sql) do not begin with a change from idle that never
// happened; one taken over does change from idle, and says so.
const sqlRebuildMailbox = `
INSERT INTO mailboxes (forge, repo, number, merge_request, created_at, updated_at, state)
VALUES ($1, $2, $3, FALSE, $4, $4, $5)
ON CONFLICT (forge, repo, number, merge_request) DO UPDATE SET updated_at = excluded.updated_at, lease_owner = NULL
WHERE mailboxes.state = 'idle' AND (mailboxes.lease_owner IS NULL OR mailboxes.lease_expires_at < $4)
RETURNING id`

// sqlRebuildIdleMailbox creates a rebuilt mailbox that is idle itself unless its issue has one
// (any one: an idle mailbox already says all an idle rebuild would, so a second rebuild stores
// nothing); no row when it has.
const sqlRebuildIdleMailbox = `
INSERT INTO mailboxes (forge, repo, number, merge_request, created_at, updated_at)
VALUES ($1, $2, $3, FALSE, $4, $4)
ON CONFLICT (forge, repo, number, merge_request) DO NOTHING
RETURNING id`

// sqlRebuiltTimes writes what a save does not: the comments still to be read, and no
// reconciliation yet.
const sqlRebuiltTimes = `UPDATE mailboxes SET comments_since = $2, issue_updated_at = $3, mr_updated_at = $4
WHERE id = $1`

// Rebuild implements mailbox.Rebuilds: the mailbox, its comments and its questions in one
// transaction.
func (s *Store) Rebuild(ctx context.Context, r *mailbox.Rebuilt) (bool, error) {
	created := false
	err := s.withTx(ctx, func(q querier) error {
		mb := &r.Mailbox
		var id int64
		stmt := sqlRebuildMailbox
		if mb.State == mailbox.StateIdle {
			stmt = sqlRebuildIdleMailbox
		}
		args := []any{mb.Forge, mb.Repo, mb.Number, s.now()}
		if stmt == sqlRebuildMailbox {
			args = append(args, mb.State)
		}
		err := q.GetContext(ctx, &id, stmt, args...)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create rebuilt mailbox: %w", err)
		}
		mb.ID, created = id, true
		if err := s.save(ctx, q, mb, s.now()); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, sqlRebuiltTimes, id, mb.CommentsSince, mb.IssueUpdatedAt, mb.MRUpdatedAt); err != nil {
			return fmt.Errorf("rebuilt mailbox %d: %w", id, err)
		}
		for i := range r.Comments {
			c := &r.Comments[i]
			c.MailboxID = id
			if _, err := q.ExecContext(ctx, sqlRecordComment, c.MailboxID, c.Key, c.Kind, c.CommentID, c.BodyHash); err != nil {
				return fmt.Errorf("record rebuilt comment: %w", err)
			}
		}
		for i := range r.Questions {
			x := &r.Questions[i]
			x.MailboxID = id
			if _, err := q.ExecContext(ctx, sqlInsertQuestion,
				x.MailboxID, x.Round, x.QID, x.Title, x.Context, x.OptionsJSON, x.Default, x.DeadlineAt); err != nil {
				return fmt.Errorf("insert rebuilt question %s: %w", x.QID, err)
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return created, nil
}
