package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ mailbox.PollStore = (*Store)(nil)

const sqlPollCursor = `SELECT since, polled_at, failed_at, error FROM poll_cursors WHERE forge = $1`

// pollCursorRow is one row of poll_cursors.
type pollCursorRow struct {
	Since    *time.Time `db:"since"`
	PolledAt *time.Time `db:"polled_at"`
	FailedAt *time.Time `db:"failed_at"`
	Error    string     `db:"error"`
}

// PollCursor implements mailbox.PollStore: the zero cursor for a forge never polled.
func (s *Store) PollCursor(ctx context.Context, forgeName string) (mailbox.PollCursor, error) {
	var row pollCursorRow
	err := s.db.GetContext(ctx, &row, sqlPollCursor, forgeName)
	if errors.Is(err, sql.ErrNoRows) {
		return mailbox.PollCursor{}, nil
	}
	if err != nil {
		return mailbox.PollCursor{}, fmt.Errorf("read the poll cursor of %s: %w", forgeName, err)
	}
	return mailbox.PollCursor{Since: timeOr(row.Since), PolledAt: timeOr(row.PolledAt), FailedAt: timeOr(row.FailedAt), Error: row.Error}, nil
}

const sqlSavePollCursor = `
INSERT INTO poll_cursors (forge, since, polled_at, failed_at, error) VALUES ($1, $2, $3, NULL, '')
ON CONFLICT (forge) DO UPDATE SET since = excluded.since, polled_at = excluded.polled_at, failed_at = NULL, error = ''`

// SavePollCursor implements mailbox.PollStore: the poll at polledAt succeeded and the next one
// asks from since; a failure recorded before is cleared.
func (s *Store) SavePollCursor(ctx context.Context, forgeName string, since, polledAt time.Time) error {
	if _, err := s.db.ExecContext(ctx, sqlSavePollCursor, forgeName, nullTime(since), polledAt); err != nil {
		return fmt.Errorf("save the poll cursor of %s: %w", forgeName, err)
	}
	return nil
}

const sqlPollFailed = `
INSERT INTO poll_cursors (forge, failed_at, error) VALUES ($1, $2, $3)
ON CONFLICT (forge) DO UPDATE SET failed_at = excluded.failed_at, error = excluded.error`

// PollFailed implements mailbox.PollStore: the cursor stays where it was.
func (s *Store) PollFailed(ctx context.Context, forgeName string, at time.Time, errText string) error {
	if _, err := s.db.ExecContext(ctx, sqlPollFailed, forgeName, at, errText); err != nil {
		return fmt.Errorf("record the failed poll of %s: %w", forgeName, err)
	}
	return nil
}

const sqlIssueMailbox = `SELECT coalesce((SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND number = $3
	AND merge_request = FALSE), 0)`

// MailboxOf implements mailbox.PollStore: the issue's mailbox, or for a merge request the
// mailbox of the issue it was opened for (FindIssueMailbox by number); 0 when none.
func (s *Store) MailboxOf(ctx context.Context, ref forge.IssueRef) (int64, error) {
	if ref.MergeRequest {
		return s.FindIssueMailbox(ctx, ref.Forge, ref.Repo, ref.Number, "", "")
	}
	var id int64
	if err := s.getPrepared(ctx, &id, sqlIssueMailbox, ref.Forge, ref.Repo, ref.Number); err != nil {
		return 0, fmt.Errorf("find the mailbox of %s: %w", ref, err)
	}
	return id, nil
}

func timeOr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
