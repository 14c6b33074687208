package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/internal/admin"
)

var _ admin.SessionReader = (*Store)(nil)

const sqlLatestSessionAny = `SELECT adapter, session_name, native_id, succeeded FROM llm_sessions
WHERE mailbox_id = $1 ORDER BY id DESC LIMIT 1`

const sqlLatestExecutor = `SELECT status, runtime, container_name, workspace_path, last_seen_at
FROM executors WHERE mailbox_id = $1 ORDER BY id DESC LIMIT 1`

const sqlLastRunUnfinished = `SELECT count(*) FROM runs r WHERE r.mailbox_id = $1
AND r.id = (SELECT max(id) FROM runs WHERE mailbox_id = $1) AND r.status IN ('interrupted', 'running')`

// SessionFacts implements admin.SessionReader.
func (s *Store) SessionFacts(ctx context.Context, mailboxID int64) (*admin.SessionFacts, error) {
	mb, err := s.Get(ctx, mailboxID)
	if err != nil {
		return nil, err
	}
	f := &admin.SessionFacts{Mailbox: mb}
	var sess admin.SessionRow
	switch err := s.db.GetContext(ctx, &sess, sqlLatestSessionAny, mailboxID); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("latest session: %w", err)
	default:
		f.Session = &sess
	}
	var c admin.ContainerRow
	switch err := s.db.GetContext(ctx, &c, sqlLatestExecutor, mailboxID); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("latest executor: %w", err)
	default:
		f.Container = &c
	}
	var n int
	if err := s.db.GetContext(ctx, &n, sqlLastRunUnfinished, mailboxID); err != nil {
		return nil, fmt.Errorf("count interrupted runs: %w", err)
	}
	f.LastRunUnfinished = n > 0
	return f, nil
}
