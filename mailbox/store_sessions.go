package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

var _ runner.SessionStore = (*Store)(nil)

const sessionColumns = `id, mailbox_id, run_id, adapter, model, session_name, native_id, resumed,
fallback_reason, tokens_in, tokens_out, cost_usd, reported_in, reported_out, reported_cost,
duration_ms, succeeded`

// LatestSession returns the mailbox's most recent successful session record, nil when none.
func (s *Store) LatestSession(ctx context.Context, mailboxID int64) (*phase.SessionRecord, error) {
	var r phase.SessionRecord
	err := s.db.GetContext(ctx, &r, `SELECT `+sessionColumns+` FROM llm_sessions
		WHERE mailbox_id = $1 AND succeeded AND native_id <> '' ORDER BY id DESC LIMIT 1`, mailboxID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("latest session: %w", err)
	}
	return &r, nil
}

// Sessions lists a mailbox's session records, oldest first.
func (s *Store) Sessions(ctx context.Context, mailboxID int64) ([]phase.SessionRecord, error) {
	var rs []phase.SessionRecord
	err := s.db.SelectContext(ctx, &rs, `SELECT `+sessionColumns+` FROM llm_sessions
		WHERE mailbox_id = $1 ORDER BY id`, mailboxID)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return rs, nil
}

// RecordSession inserts r and sets r.ID.
func (s *Store) RecordSession(ctx context.Context, r *phase.SessionRecord) error {
	err := s.db.GetContext(ctx, &r.ID, `INSERT INTO llm_sessions (mailbox_id, run_id, adapter, model,
		session_name, native_id, resumed, fallback_reason, tokens_in, tokens_out, cost_usd, reported_in,
		reported_out, reported_cost, duration_ms, succeeded)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id`,
		r.MailboxID, r.RunID, r.Adapter, r.Model, r.Name, r.NativeID, r.Resumed, r.FallbackReason,
		r.TokensIn, r.TokensOut, r.CostUSD, r.ReportedIn, r.ReportedOut, r.ReportedCost, r.DurationMS, r.Succeeded)
	if err != nil {
		return fmt.Errorf("record session: %w", err)
	}
	if r.RunID != nil {
		// The run's latest container now knows its session.
		_, err = s.db.ExecContext(ctx, `UPDATE executors SET session_id = $1, native_session_id = $2
			WHERE id = (SELECT max(id) FROM executors WHERE run_id = $3)`, r.ID, r.NativeID, *r.RunID)
		if err != nil {
			return fmt.Errorf("link the session to its executor: %w", err)
		}
	}
	return nil
}

// Installation returns the recorded CLI version of adapter in image, nil when unknown.
func (s *Store) Installation(ctx context.Context, adapter, image string) (*runner.Installation, error) {
	var in runner.Installation
	err := s.db.GetContext(ctx, &in, `SELECT adapter, image, version, resume_verified
		FROM agent_installations WHERE adapter = $1 AND image = $2`, adapter, image)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get installation: %w", err)
	}
	return &in, nil
}

// RecordInstallation stores (or replaces) a detected CLI version.
func (s *Store) RecordInstallation(ctx context.Context, in runner.Installation) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO agent_installations (adapter, image, version, resume_verified)
		VALUES ($1, $2, $3, $4) ON CONFLICT (adapter, image) DO UPDATE
		SET version = EXCLUDED.version, resume_verified = EXCLUDED.resume_verified, detected_at = now()`,
		in.Adapter, in.Image, in.Version, in.ResumeVerified)
	if err != nil {
		return fmt.Errorf("record installation: %w", err)
	}
	return nil
}
