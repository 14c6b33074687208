package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/runner"
)

// The executors table: one row per run container, so a restarted Alfred finds its containers
// again. These methods implement runner.ContainerLog.

const executorColumns = `id, run_id, mailbox_id, runtime, container_id, container_name, status, adapter,
workspace_path, branch, supports_session_resume, native_session_id, last_seen_at, error_message, created_at`

const sqlInsertExecutor = `
INSERT INTO executors (run_id, mailbox_id, container_name, status, adapter, workspace_path, branch,
	supports_session_resume, native_session_id, last_seen_at, created_at)
VALUES ($1, $2, $3, 'starting', $4, $5, $6, $7, $8, $9, $9)
ON CONFLICT (container_name) DO NOTHING
RETURNING ` + executorColumns

// InsertContainer implements runner.ContainerLog: a row already holding r.ContainerName is an
// error wrapping runner.ErrNameConflict.
func (s *Store) InsertContainer(ctx context.Context, r *runner.ContainerRecord) error {
	err := s.db.GetContext(ctx, r, sqlInsertExecutor, r.RunID, r.MailboxID, r.ContainerName, r.Adapter,
		r.WorkspacePath, r.Branch, r.SupportsSessionResume, r.NativeSessionID, s.now())
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("insert container record %s: %w (a record already has that name)", r.ContainerName, runner.ErrNameConflict)
	}
	if err != nil {
		return fmt.Errorf("insert container record %s: %w", r.ContainerName, err)
	}
	return nil
}

const sqlExecutorReady = `UPDATE executors SET container_id = $2, status = 'ready', last_seen_at = $3 WHERE id = $1`

// ContainerStarted implements runner.ContainerLog.
func (s *Store) ContainerStarted(ctx context.Context, id int64, container runner.ContainerID) error {
	if _, err := s.db.ExecContext(ctx, sqlExecutorReady, id, string(container), s.now()); err != nil {
		return fmt.Errorf("container record %d ready: %w", id, err)
	}
	return nil
}

const sqlExecutorSeen = `UPDATE executors SET last_seen_at = $2 WHERE id = $1`

// ContainerSeen implements runner.ContainerLog.
func (s *Store) ContainerSeen(ctx context.Context, id int64) error {
	if _, err := s.db.ExecContext(ctx, sqlExecutorSeen, id, s.now()); err != nil {
		return fmt.Errorf("container record %d heartbeat: %w", id, err)
	}
	return nil
}

const sqlEndExecutor = `UPDATE executors SET status = $2, error_message = $3, last_seen_at = $4 WHERE id = $1`

// EndContainer implements runner.ContainerLog; a live status is refused.
func (s *Store) EndContainer(ctx context.Context, id int64, status runner.ContainerStatus, message string) error {
	if status.Live() {
		return fmt.Errorf("end container record %d: %q is not a final status", id, status)
	}
	if _, err := s.db.ExecContext(ctx, sqlEndExecutor, id, string(status), message, s.now()); err != nil {
		return fmt.Errorf("end container record %d: %w", id, err)
	}
	return nil
}

const sqlLiveExecutors = `SELECT ` + executorColumns + ` FROM executors
WHERE status IN ('starting', 'ready') ORDER BY id`

// LiveContainers implements runner.ContainerLog.
func (s *Store) LiveContainers(ctx context.Context) ([]runner.ContainerRecord, error) {
	var rs []runner.ContainerRecord
	if err := s.db.SelectContext(ctx, &rs, sqlLiveExecutors); err != nil {
		return nil, fmt.Errorf("list live container records: %w", err)
	}
	return rs, nil
}

const sqlRunExecutors = `SELECT ` + executorColumns + ` FROM executors WHERE run_id = $1 ORDER BY id`

// RunContainers implements runner.ContainerLog.
func (s *Store) RunContainers(ctx context.Context, runID int64) ([]runner.ContainerRecord, error) {
	var rs []runner.ContainerRecord
	if err := s.db.SelectContext(ctx, &rs, sqlRunExecutors, runID); err != nil {
		return nil, fmt.Errorf("list container records of run %d: %w", runID, err)
	}
	return rs, nil
}

// sqlLiveExecutorMailboxes reads the live container records (executors_live) only.
const sqlLiveExecutorMailboxes = `SELECT DISTINCT mailbox_id FROM executors WHERE status IN ('starting', 'ready')`

// LiveContainerMailboxes returns the ids of mailboxes that have a container record in status
// starting or ready.
func (s *Store) LiveContainerMailboxes(ctx context.Context) (map[int64]bool, error) {
	return s.idSet(ctx, "mailboxes with live container records", sqlLiveExecutorMailboxes)
}
