package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/internal/admin"
)

// The operator_sessions table; these methods implement admin.OperatorSessions, so every
// replica sharing the store knows the sessions the operators opened on any of them.

var _ admin.OperatorSessions = (*Store)(nil)

const sqlCreateOperatorSession = `INSERT INTO operator_sessions
(id_hash, token_fingerprint, created_at, expires_at, last_seen_at) VALUES ($1, $2, $3, $4, $5)`

const sqlFindOperatorSession = `SELECT id_hash, token_fingerprint, created_at, expires_at, last_seen_at
FROM operator_sessions WHERE id_hash = $1 AND token_fingerprint = $2 AND expires_at > $3`

const sqlTouchOperatorSession = `UPDATE operator_sessions SET last_seen_at = $2 WHERE id_hash = $1`

const sqlEndOperatorSession = `DELETE FROM operator_sessions WHERE id_hash = $1`

const sqlPruneOperatorSessions = `DELETE FROM operator_sessions WHERE expires_at <= $1 OR token_fingerprint <> $2`

// CreateOperatorSession implements admin.OperatorSessions.
func (s *Store) CreateOperatorSession(ctx context.Context, se admin.OperatorSession) error {
	if _, err := s.db.ExecContext(ctx, sqlCreateOperatorSession, se.IDHash, se.Token, se.CreatedAt,
		se.ExpiresAt, se.LastSeenAt); err != nil {
		return fmt.Errorf("create operator session: %w", err)
	}
	return nil
}

// FindOperatorSession implements admin.OperatorSessions.
func (s *Store) FindOperatorSession(ctx context.Context, idHash, token string, now time.Time) (*admin.OperatorSession, error) {
	var se admin.OperatorSession
	err := s.getPrepared(ctx, &se, sqlFindOperatorSession, idHash, token, now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find operator session: %w", err)
	}
	return &se, nil
}

// TouchOperatorSession implements admin.OperatorSessions.
func (s *Store) TouchOperatorSession(ctx context.Context, idHash string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, sqlTouchOperatorSession, idHash, at); err != nil {
		return fmt.Errorf("touch operator session: %w", err)
	}
	return nil
}

// EndOperatorSession implements admin.OperatorSessions.
func (s *Store) EndOperatorSession(ctx context.Context, idHash string) error {
	if _, err := s.db.ExecContext(ctx, sqlEndOperatorSession, idHash); err != nil {
		return fmt.Errorf("end operator session: %w", err)
	}
	return nil
}

// PruneOperatorSessions implements admin.OperatorSessions.
func (s *Store) PruneOperatorSessions(ctx context.Context, now time.Time, token string) (int64, error) {
	res, err := s.db.ExecContext(ctx, sqlPruneOperatorSessions, now, token)
	if err != nil {
		return 0, fmt.Errorf("prune operator sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune operator sessions: %w", err)
	}
	return n, nil
}
