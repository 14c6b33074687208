package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

// The llm_sessions and agent_installations tables; these methods implement
// runner.SessionStore.

const sessionColumns = `id, mailbox_id, run_id, adapter, model, session_name, native_id, resumed,
fallback_reason, tokens_in, tokens_out, cost_usd, reported_in, reported_out, reported_cost,
duration_ms, succeeded, state_host`

const sqlLatestSession = `SELECT ` + sessionColumns + ` FROM llm_sessions
WHERE mailbox_id = $1 AND succeeded AND native_id <> '' ORDER BY id DESC LIMIT 1`

// LatestSession implements runner.SessionStore.
func (s *Store) LatestSession(ctx context.Context, mailboxID int64) (*phase.SessionRecord, error) {
	var r phase.SessionRecord
	err := s.db.GetContext(ctx, &r, sqlLatestSession, mailboxID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("latest session: %w", err)
	}
	return &r, nil
}

const sqlSessions = `SELECT ` + sessionColumns + ` FROM llm_sessions WHERE mailbox_id = $1 ORDER BY id`

// Sessions lists a mailbox's session records, oldest first.
func (s *Store) Sessions(ctx context.Context, mailboxID int64) ([]phase.SessionRecord, error) {
	var rs []phase.SessionRecord
	if err := s.db.SelectContext(ctx, &rs, sqlSessions, mailboxID); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return rs, nil
}

const sqlRecordSession = `
INSERT INTO llm_sessions (mailbox_id, run_id, adapter, model, session_name, native_id, resumed,
	fallback_reason, tokens_in, tokens_out, cost_usd, reported_in, reported_out, reported_cost,
	duration_ms, succeeded, state_host, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) RETURNING id`

// sqlLinkSession tells the run's latest container its session.
const sqlLinkSession = `UPDATE executors SET session_id = $1, native_session_id = $2
WHERE id = (SELECT max(id) FROM executors WHERE run_id = $3)`

// RecordSession implements runner.SessionStore; the run's latest container record is linked
// to the session.
func (s *Store) RecordSession(ctx context.Context, r *phase.SessionRecord) error {
	err := s.db.GetContext(ctx, &r.ID, sqlRecordSession,
		r.MailboxID, r.RunID, r.Adapter, r.Model, r.Name, r.NativeID, r.Resumed, r.FallbackReason,
		r.TokensIn, r.TokensOut, r.CostUSD, r.ReportedIn, r.ReportedOut, r.ReportedCost, r.DurationMS, r.Succeeded, r.StateHost, s.now())
	if err != nil {
		return fmt.Errorf("record session: %w", err)
	}
	if r.RunID != nil {
		if _, err := s.db.ExecContext(ctx, sqlLinkSession, r.ID, r.NativeID, *r.RunID); err != nil {
			return fmt.Errorf("link the session to its container record: %w", err)
		}
	}
	return nil
}

const sqlInstallation = `SELECT adapter, image, version, resume_verified
FROM agent_installations WHERE adapter = $1 AND image = $2`

// Installation implements runner.SessionStore.
func (s *Store) Installation(ctx context.Context, adapter, image string) (*runner.Installation, error) {
	var in runner.Installation
	err := s.db.GetContext(ctx, &in, sqlInstallation, adapter, image)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get installation: %w", err)
	}
	return &in, nil
}

const sqlRecordInstallation = `
INSERT INTO agent_installations (adapter, image, version, resume_verified, detected_at)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (adapter, image) DO UPDATE
SET version = EXCLUDED.version, resume_verified = EXCLUDED.resume_verified, detected_at = EXCLUDED.detected_at`

// RecordInstallation implements runner.SessionStore.
func (s *Store) RecordInstallation(ctx context.Context, in runner.Installation) error {
	if _, err := s.db.ExecContext(ctx, sqlRecordInstallation, in.Adapter, in.Image, in.Version, in.ResumeVerified, s.now()); err != nil {
		return fmt.Errorf("record installation: %w", err)
	}
	return nil
}
