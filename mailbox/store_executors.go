package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/runner"
)

// The executors table (one row per run container, so a restarted Alfred finds its containers
// again) and the runs a restart leaves behind. Portable SQL only.

var _ runner.ContainerLog = (*Store)(nil)

const executorColumns = `id, run_id, mailbox_id, runtime, container_id, container_name, status, adapter,
workspace_path, branch, supports_session_resume, native_session_id, last_seen_at, error_message, created_at`

// InsertExecutor writes r in status starting (before its container is created) and sets r.ID,
// r.Status and the timestamps. A row already holding r.ContainerName is an error wrapping
// runner.ErrNameConflict. It implements runner.ContainerLog.
func (s *Store) InsertExecutor(ctx context.Context, r *runner.ContainerRecord) error {
	err := s.db.GetContext(ctx, r, `INSERT INTO executors
		(run_id, mailbox_id, container_name, status, adapter, workspace_path, branch,
		 supports_session_resume, native_session_id)
		VALUES ($1, $2, $3, 'starting', $4, $5, $6, $7, $8)
		ON CONFLICT (container_name) DO NOTHING
		RETURNING `+executorColumns,
		r.RunID, r.MailboxID, r.ContainerName, r.Adapter, r.WorkspacePath, r.Branch,
		r.SupportsSessionResume, r.NativeSessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("insert executor %s: %w (an executor row already has that name)", r.ContainerName, runner.ErrNameConflict)
	}
	if err != nil {
		return fmt.Errorf("insert executor %s: %w", r.ContainerName, err)
	}
	return nil
}

// ExecutorReady records the started container's id and sets status ready.
func (s *Store) ExecutorReady(ctx context.Context, id int64, container runner.ContainerID) error {
	_, err := s.db.ExecContext(ctx, `UPDATE executors SET container_id = $2, status = 'ready',
		last_seen_at = CURRENT_TIMESTAMP WHERE id = $1`, id, string(container))
	if err != nil {
		return fmt.Errorf("executor %d ready: %w", id, err)
	}
	return nil
}

// ExecutorSeen renews the executor's last_seen_at (heartbeat).
func (s *Store) ExecutorSeen(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE executors SET last_seen_at = CURRENT_TIMESTAMP WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("executor %d heartbeat: %w", id, err)
	}
	return nil
}

// EndExecutor sets the executor's final status (error or stopped) and message.
func (s *Store) EndExecutor(ctx context.Context, id int64, status runner.ContainerStatus, message string) error {
	if status.Live() {
		return fmt.Errorf("end executor %d: %q is not a final status", id, status)
	}
	_, err := s.db.ExecContext(ctx, `UPDATE executors SET status = $2, error_message = $3,
		last_seen_at = CURRENT_TIMESTAMP WHERE id = $1`, id, string(status), message)
	if err != nil {
		return fmt.Errorf("end executor %d: %w", id, err)
	}
	return nil
}

// LiveExecutors returns the executors in status starting or ready, oldest first.
func (s *Store) LiveExecutors(ctx context.Context) ([]runner.ContainerRecord, error) {
	var rs []runner.ContainerRecord
	err := s.db.SelectContext(ctx, &rs, `SELECT `+executorColumns+` FROM executors
		WHERE status IN ('starting', 'ready') ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list live executors: %w", err)
	}
	return rs, nil
}

// RunExecutors returns the executors of a run, oldest first.
func (s *Store) RunExecutors(ctx context.Context, runID int64) ([]runner.ContainerRecord, error) {
	var rs []runner.ContainerRecord
	err := s.db.SelectContext(ctx, &rs, `SELECT `+executorColumns+` FROM executors
		WHERE run_id = $1 ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list executors of run %d: %w", runID, err)
	}
	return rs, nil
}

const runColumns = `id, mailbox_id, phase, step, attempt, status, container, started_at, finished_at,
exit_code, outcome, output, result, head_sha, applied, resumable, not_resumable_reason`

// RunningRuns returns the mailbox's runs still in status running, oldest first: after a crash,
// the runs recovery must account for.
func (s *Store) RunningRuns(ctx context.Context, mailboxID int64) ([]Run, error) {
	var rs []Run
	err := s.db.SelectContext(ctx, &rs, `SELECT `+runColumns+` FROM runs
		WHERE mailbox_id = $1 AND status = 'running' ORDER BY id`, mailboxID)
	if err != nil {
		return nil, fmt.Errorf("list running runs: %w", err)
	}
	return rs, nil
}

// FinishRecoveredRun records the end of a run found by recovery: status, outcome, output,
// result, pushed commit, the session hook and whether the machine still has to act on it
// (r.Applied false). Only a run still running is changed; it reports whether it was.
func (s *Store) FinishRecoveredRun(ctx context.Context, r *Run) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET status = $2, container = $3,
		finished_at = CURRENT_TIMESTAMP, exit_code = $4, outcome = $5, output = $6, result = $7, head_sha = $8,
		applied = $9, resumable = $10, not_resumable_reason = $11
		WHERE id = $1 AND status = 'running'`,
		r.ID, r.Status, r.Container, r.ExitCode, r.Outcome, r.Output, r.Result, r.HeadSHA,
		r.Applied, r.Resumable, r.NotResumableReason)
	if err != nil {
		return false, fmt.Errorf("finish recovered run %d: %w", r.ID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// UnappliedRun returns the latest run of the mailbox's phase and step when it was finished by
// recovery and not yet acted on, else nil.
func (s *Store) UnappliedRun(ctx context.Context, mailboxID int64, phase, step string) (*Run, error) {
	var r Run
	err := s.db.GetContext(ctx, &r, `SELECT `+runColumns+` FROM runs
		WHERE mailbox_id = $1 AND phase = $2 AND step = $3 ORDER BY id DESC LIMIT 1`, mailboxID, phase, step)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find unapplied run: %w", err)
	}
	if r.Applied || r.Status == RunRunning {
		return nil, nil
	}
	return &r, nil
}

// MarkApplied records that the machine acted on the outcome of a recovered run; q may be a
// transaction that also saves the mailbox (nil: the pool).
func (s *Store) MarkApplied(ctx context.Context, q Querier, runIDs ...int64) error {
	if q == nil {
		q = s.db
	}
	for _, id := range runIDs {
		if _, err := q.ExecContext(ctx, `UPDATE runs SET applied = TRUE WHERE id = $1`, id); err != nil {
			return fmt.Errorf("mark run %d applied: %w", id, err)
		}
	}
	return nil
}

// DiscardUnapplied marks every unapplied run of the mailbox applied: the machine moved on
// without needing them (the state no longer calls for their phase).
func (s *Store) DiscardUnapplied(ctx context.Context, mailboxID int64) error {
	_, err := s.db.ExecContext(ctx, `UPDATE runs SET applied = TRUE
		WHERE mailbox_id = $1 AND applied = FALSE`, mailboxID)
	if err != nil {
		return fmt.Errorf("discard unapplied runs: %w", err)
	}
	return nil
}

// LiveExecutorMailboxes returns the ids of mailboxes that have an executor in status starting
// or ready.
func (s *Store) LiveExecutorMailboxes(ctx context.Context) (map[int64]bool, error) {
	var ids []int64
	err := s.db.SelectContext(ctx, &ids, `SELECT DISTINCT mailbox_id FROM executors
		WHERE status IN ('starting', 'ready')`)
	if err != nil {
		return nil, fmt.Errorf("list mailboxes with live executors: %w", err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// UnfinishedMailboxes returns the ids of mailboxes a restart must look at: those with a live
// executor or a run still in status running.
func (s *Store) UnfinishedMailboxes(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := s.db.SelectContext(ctx, &ids, `SELECT mailbox_id FROM executors WHERE status IN ('starting', 'ready')
		UNION SELECT mailbox_id FROM runs WHERE status = 'running' ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list unfinished mailboxes: %w", err)
	}
	return ids, nil
}
