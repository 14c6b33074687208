package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/mailbox"
)

const runColumns = `id, mailbox_id, phase, step, attempt, status, container, started_at, finished_at,
exit_code, outcome, output, result, head_sha, applied, resumable, not_resumable_reason`

// sqlCountRuns gives a new run's attempt (the runs of its decision so far, plus one) and
// whether the decision already has a run still recorded running or one whose result was
// collected and never applied (a rerun: mailbox.Run.Rerun).
const sqlCountRuns = `SELECT count(*) + 1 AS attempt,
	COALESCE(SUM(CASE WHEN status = 'running' OR (status = 'succeeded' AND NOT applied) THEN 1 ELSE 0 END), 0) AS reruns
FROM runs WHERE mailbox_id = $1 AND phase = $2 AND step = $3`

const sqlStartRun = `
INSERT INTO runs (mailbox_id, phase, step, attempt, status, container, started_at)
VALUES ($1, $2, $3, $4, 'running', $5, $6)
RETURNING id, mailbox_id, phase, step, attempt, status, container, started_at`

// StartRun implements mailbox.Runs.
func (s *Store) StartRun(ctx context.Context, r *mailbox.Run) error {
	var prior struct {
		Attempt int `db:"attempt"`
		Reruns  int `db:"reruns"`
	}
	if err := s.db.GetContext(ctx, &prior, sqlCountRuns, r.MailboxID, r.Phase, r.Step); err != nil {
		return fmt.Errorf("count runs: %w", err)
	}
	r.Attempt, r.Rerun = prior.Attempt, prior.Reruns > 0
	err := s.db.GetContext(ctx, r, sqlStartRun, r.MailboxID, r.Phase, r.Step, r.Attempt, r.Container, s.now())
	if err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	return nil
}

const sqlFinishRun = `
UPDATE runs SET status = $2, container = $3, finished_at = $8, exit_code = $4, outcome = $5,
	output = $6, result = $7
WHERE id = $1`

// FinishRun implements mailbox.Runs.
func (s *Store) FinishRun(ctx context.Context, r *mailbox.Run) error {
	_, err := s.db.ExecContext(ctx, sqlFinishRun, r.ID, r.Status, r.Container, r.ExitCode, r.Outcome,
		r.Output, r.Result, s.now())
	if err != nil {
		return fmt.Errorf("finish run %d: %w", r.ID, err)
	}
	return nil
}

const sqlRuns = `SELECT ` + runColumns + ` FROM runs WHERE mailbox_id = $1 ORDER BY id`

// Runs lists a mailbox's runs, oldest first.
func (s *Store) Runs(ctx context.Context, mailboxID int64) ([]mailbox.Run, error) {
	var rs []mailbox.Run
	if err := s.db.SelectContext(ctx, &rs, sqlRuns, mailboxID); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return rs, nil
}

const sqlInterruptRuns = `
UPDATE runs SET status = 'interrupted', finished_at = $2,
	outcome = 'interrupted: the worker running it stopped'
WHERE mailbox_id = $1 AND status = 'running'
RETURNING id, mailbox_id, phase, step, attempt, status, container, started_at`

// InterruptRuns implements mailbox.Runs.
func (s *Store) InterruptRuns(ctx context.Context, mailboxID int64) ([]mailbox.Run, error) {
	var rs []mailbox.Run
	if err := s.db.SelectContext(ctx, &rs, sqlInterruptRuns, mailboxID, s.now()); err != nil {
		return nil, fmt.Errorf("interrupt runs: %w", err)
	}
	return rs, nil
}

const sqlRunningRuns = `SELECT ` + runColumns + ` FROM runs WHERE mailbox_id = $1 AND status = 'running' ORDER BY id`

// RunningRuns implements mailbox.Runs.
func (s *Store) RunningRuns(ctx context.Context, mailboxID int64) ([]mailbox.Run, error) {
	var rs []mailbox.Run
	if err := s.db.SelectContext(ctx, &rs, sqlRunningRuns, mailboxID); err != nil {
		return nil, fmt.Errorf("list running runs: %w", err)
	}
	return rs, nil
}

const sqlFinishRecoveredRun = `
UPDATE runs SET status = $2, container = $3, finished_at = $12, exit_code = $4, outcome = $5,
	output = $6, result = $7, head_sha = $8, applied = $9, resumable = $10, not_resumable_reason = $11
WHERE id = $1 AND status = 'running'`

// FinishRecoveredRun implements mailbox.Runs.
func (s *Store) FinishRecoveredRun(ctx context.Context, r *mailbox.Run) (bool, error) {
	res, err := s.db.ExecContext(ctx, sqlFinishRecoveredRun,
		r.ID, r.Status, r.Container, r.ExitCode, r.Outcome, r.Output, r.Result, r.HeadSHA,
		r.Applied, r.Resumable, r.NotResumableReason, s.now())
	if err != nil {
		return false, fmt.Errorf("finish recovered run %d: %w", r.ID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

const sqlLatestRun = `SELECT ` + runColumns + ` FROM runs
WHERE mailbox_id = $1 AND phase = $2 AND step = $3 ORDER BY id DESC LIMIT 1`

// UnappliedRun implements mailbox.Runs.
func (s *Store) UnappliedRun(ctx context.Context, mailboxID int64, phase, step string) (*mailbox.Run, error) {
	var r mailbox.Run
	err := s.db.GetContext(ctx, &r, sqlLatestRun, mailboxID, phase, step)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find unapplied run: %w", err)
	}
	if r.Applied || r.Status == mailbox.RunRunning {
		return nil, nil
	}
	return &r, nil
}

const sqlMarkApplied = `UPDATE runs SET applied = TRUE WHERE id = $1`

// SaveApplied implements mailbox.Runs.
func (s *Store) SaveApplied(ctx context.Context, m *mailbox.Mailbox, runID int64) error {
	return s.withTx(ctx, func(q querier) error {
		if err := s.save(ctx, q, m, s.now()); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, sqlMarkApplied, runID); err != nil {
			return fmt.Errorf("mark run %d applied: %w", runID, err)
		}
		return nil
	})
}

// sqlDiscardUnapplied marks the mailbox's ($1) unapplied runs applied but those of phase $2
// and step $3, fenced by the lease owner the mailbox was read with, $4 (SaveMailboxSQL).
const sqlDiscardUnapplied = `UPDATE runs SET applied = TRUE
WHERE mailbox_id = $1 AND applied = FALSE AND ($2 = '' OR phase <> $2 OR step <> $3)
AND EXISTS (SELECT 1 FROM mailboxes m WHERE m.id = $1 AND m.lease_owner IS NOT DISTINCT FROM $4)`

// DiscardUnapplied implements mailbox.Runs.
func (s *Store) DiscardUnapplied(ctx context.Context, mb *mailbox.Mailbox, keepPhase, keepStep string) error {
	if _, err := s.db.ExecContext(ctx, sqlDiscardUnapplied, mb.ID, keepPhase, keepStep, mb.LeaseOwner); err != nil {
		return fmt.Errorf("discard unapplied runs: %w", err)
	}
	return nil
}
