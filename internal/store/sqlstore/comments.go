package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/mailbox"
)

const sqlPostedComment = `SELECT mailbox_id, key, kind, comment_id, body_hash FROM comments
WHERE mailbox_id = $1 AND key = $2`

// PostedComment implements mailbox.Comments.
func (s *Store) PostedComment(ctx context.Context, mailboxID int64, key string) (*mailbox.PostedComment, error) {
	var c mailbox.PostedComment
	err := s.db.GetContext(ctx, &c, sqlPostedComment, mailboxID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get posted comment: %w", err)
	}
	return &c, nil
}

const sqlRecordComment = `
INSERT INTO comments (mailbox_id, key, kind, comment_id, body_hash) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (mailbox_id, key) DO UPDATE SET comment_id = EXCLUDED.comment_id,
	body_hash = EXCLUDED.body_hash, kind = EXCLUDED.kind`

// RecordComment implements mailbox.Comments.
func (s *Store) RecordComment(ctx context.Context, c mailbox.PostedComment) error {
	if _, err := s.db.ExecContext(ctx, sqlRecordComment, c.MailboxID, c.Key, c.Kind, c.CommentID, c.BodyHash); err != nil {
		return fmt.Errorf("record comment: %w", err)
	}
	return nil
}
