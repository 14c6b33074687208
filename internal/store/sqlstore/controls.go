package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/mailbox"
)

// sqlNotPaused is true for mailbox m when neither it, its project nor the installation is
// paused; the claims (sqlLeaseEvents, sqlLeaseRun) and the queued-runs list add it, so a paused
// mailbox keeps its events and is not claimed until it is resumed.
const sqlNotPaused = `m.paused_at IS NULL
	  AND NOT EXISTS (SELECT 1 FROM paused_projects p WHERE p.forge = m.forge AND p.repo = m.repo)
	  AND ` + sqlNotPausedInstallation

// Operator actions recorded in the timeline (operator_actions.action).
const (
	ActionPause         = "paused the mailbox"
	ActionResume        = "resumed the mailbox"
	ActionPauseProject  = "paused the project"
	ActionResumeProject = "resumed the project"
	ActionCancelRun     = "cancelled run %d"
)

const sqlRecordAction = `INSERT INTO operator_actions (mailbox_id, forge, repo, action, actor, at)
VALUES ($1, $2, $3, $4, $5, $6)`

const sqlPauseMailbox = `UPDATE mailboxes SET paused_at = $2, paused_by = $3 WHERE id = $1
RETURNING forge, repo`

const sqlResumeMailbox = `UPDATE mailboxes SET paused_at = NULL, paused_by = '' WHERE id = $1
RETURNING forge, repo`

// PauseMailbox stops the workers from claiming mailbox id (its events are still stored) and
// records who did it (by: the operator's identity) in its timeline; an error wrapping
// mailbox.ErrNotFound when there is no such mailbox. A run in progress goes on.
func (s *Store) PauseMailbox(ctx context.Context, id int64, by string) error {
	return s.setPaused(ctx, id, by, true)
}

// ResumeMailbox lets the workers claim mailbox id again, its stored events applied in order,
// and records who did it; an error wrapping mailbox.ErrNotFound when there is none.
func (s *Store) ResumeMailbox(ctx context.Context, id int64, by string) error {
	return s.setPaused(ctx, id, by, false)
}

func (s *Store) setPaused(ctx context.Context, id int64, by string, pause bool) error {
	return s.withTx(ctx, func(q querier) error {
		var ref struct {
			Forge string `db:"forge"`
			Repo  string `db:"repo"`
		}
		query, args, action := sqlResumeMailbox, []any{id}, ActionResume
		if pause {
			query, args, action = sqlPauseMailbox, []any{id, s.now(), by}, ActionPause
		}
		if err := getOne(ctx, q, &ref, query, args...); err != nil {
			return fmt.Errorf("%s %d: %w", action, id, err)
		}
		if _, err := q.ExecContext(ctx, sqlRecordAction, id, ref.Forge, ref.Repo, action, by, s.now()); err != nil {
			return fmt.Errorf("record operator action: %w", err)
		}
		return nil
	})
}

const sqlPauseProject = `INSERT INTO paused_projects (forge, repo, paused_at, paused_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (forge, repo) DO NOTHING`

const sqlResumeProject = `DELETE FROM paused_projects WHERE forge = $1 AND repo = $2`

// PauseProject stops the workers from claiming any mailbox of repository repo on the forge
// named forgeName, those created later included, and records who did it in the timeline of
// the project's mailboxes. Pausing a paused project changes nothing but the record.
func (s *Store) PauseProject(ctx context.Context, forgeName, repo, by string) error {
	return s.setProjectPaused(ctx, forgeName, repo, by, true)
}

// ResumeProject lets the workers claim the project's mailboxes again (those paused one by one
// stay paused) and records who did it.
func (s *Store) ResumeProject(ctx context.Context, forgeName, repo, by string) error {
	return s.setProjectPaused(ctx, forgeName, repo, by, false)
}

func (s *Store) setProjectPaused(ctx context.Context, forgeName, repo, by string, pause bool) error {
	return s.withTx(ctx, func(q querier) error {
		var err error
		action := ActionResumeProject
		if pause {
			action = ActionPauseProject
			_, err = q.ExecContext(ctx, sqlPauseProject, forgeName, repo, s.now(), by)
		} else {
			_, err = q.ExecContext(ctx, sqlResumeProject, forgeName, repo)
		}
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", action, forgeName, repo, err)
		}
		if _, err := q.ExecContext(ctx, sqlRecordAction, nil, forgeName, repo, action, by, s.now()); err != nil {
			return fmt.Errorf("record operator action: %w", err)
		}
		return nil
	})
}

const sqlRequestCancel = `UPDATE runs SET cancel_requested_by = $2 WHERE id = $1 AND status = 'running'
RETURNING mailbox_id`

// RequestCancel asks the process running run runID to stop it (mailbox.Controls: the running
// phase looks for the request, its container is stopped and removed, the issue told) and
// records who asked in the mailbox's timeline. An error wrapping mailbox.ErrNotFound when no
// such run is running.
func (s *Store) RequestCancel(ctx context.Context, runID int64, by string) error {
	return s.withTx(ctx, func(q querier) error {
		var mailboxID int64
		if err := getOne(ctx, q, &mailboxID, sqlRequestCancel, runID, by); err != nil {
			return fmt.Errorf("cancel run %d: %w", runID, err)
		}
		_, err := q.ExecContext(ctx, `INSERT INTO operator_actions (mailbox_id, forge, repo, action, actor, at)
SELECT id, forge, repo, $2, $3, $4 FROM mailboxes WHERE id = $1`, mailboxID, fmt.Sprintf(ActionCancelRun, runID), by, s.now())
		if err != nil {
			return fmt.Errorf("record operator action: %w", err)
		}
		return nil
	})
}

// CancelRequested implements mailbox.Controls: who asked to cancel run runID, "" when nobody
// did (or there is no such run).
func (s *Store) CancelRequested(ctx context.Context, runID int64) (string, error) {
	var by []string
	if err := s.selectPrepared(ctx, &by, `SELECT cancel_requested_by FROM runs WHERE id = $1`, runID); err != nil {
		return "", fmt.Errorf("read the cancel request of run %d: %w", runID, err)
	}
	if len(by) == 0 {
		return "", nil
	}
	return by[0], nil
}

// getOne reads one row into dest; an error wrapping mailbox.ErrNotFound when there is none.
func getOne(ctx context.Context, q querier, dest any, query string, args ...any) error {
	err := q.GetContext(ctx, dest, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return mailbox.ErrNotFound
	}
	return err
}
