package mailbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Resume reasons of SessionStatus: why a mailbox's session is not being resumed right now.
const (
	ReasonAgentNotRunning    = "agent_not_running"    // resumable, no executor runs: the next run resumes
	ReasonNotResumable       = "not_resumable"        // the last session cannot be resumed (failed, or the adapter cannot)
	ReasonMissingResumeToken = "missing_resume_token" // no native session id was recorded
)

// SessionStatus is the answer of GET /mailboxes/{id}/session.
type SessionStatus struct {
	MailboxID int64  `json:"mailbox_id"`
	State     State  `json:"state"`
	Branch    string `json:"branch"`
	// SessionName is the session's name (the branch), NativeID the CLI's id, Adapter the CLI.
	SessionName string `json:"session_name,omitempty"`
	NativeID    string `json:"native_id,omitempty"`
	Adapter     string `json:"adapter,omitempty"`
	// IsResumable: the latest session completed and has a native id.
	IsResumable bool `json:"is_resumable"`
	// NeedsResume: a run of the open mailbox was interrupted and no executor runs it.
	NeedsResume  bool   `json:"needs_resume"`
	ResumeReason string `json:"resume_reason,omitempty"`
	// The latest executor (container) of the mailbox.
	ExecutorStatus string     `json:"executor_status,omitempty"`
	Runtime        string     `json:"runtime,omitempty"`
	Container      string     `json:"container,omitempty"`
	WorktreePath   string     `json:"worktree_path,omitempty"`
	LastSeenAt     *time.Time `json:"last_seen_at,omitempty"`
}

// SessionStatus reports the session state of a mailbox; sql.ErrNoRows (wrapped) when the
// mailbox does not exist.
func (s *Store) SessionStatus(ctx context.Context, mailboxID int64) (*SessionStatus, error) {
	mb, err := s.Get(ctx, mailboxID)
	if err != nil {
		return nil, err
	}
	st := &SessionStatus{MailboxID: mb.ID, State: mb.State, Branch: mb.Branch}
	sess, err := s.latestSessionAny(ctx, mailboxID)
	if err != nil {
		return nil, err
	}
	if sess != nil {
		st.SessionName, st.NativeID, st.Adapter = sess.Name, sess.NativeID, sess.Adapter
		// A closed mailbox's session state is removed: nothing is resumable any more.
		st.IsResumable = sess.Succeeded && sess.NativeID != "" && mb.ClosedAt == nil
	}
	var ex struct {
		Status    string    `db:"status"`
		Runtime   string    `db:"runtime"`
		Name      string    `db:"container_name"`
		Workspace string    `db:"workspace_path"`
		LastSeen  time.Time `db:"last_seen_at"`
	}
	err = s.db.GetContext(ctx, &ex, `SELECT status, runtime, container_name, workspace_path, last_seen_at
		FROM executors WHERE mailbox_id = $1 ORDER BY id DESC LIMIT 1`, mailboxID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("latest executor: %w", err)
	default:
		st.ExecutorStatus, st.Runtime, st.Container, st.WorktreePath = ex.Status, ex.Runtime, ex.Name, ex.Workspace
		st.LastSeenAt = &ex.LastSeen
	}
	running := st.ExecutorStatus == "starting" || st.ExecutorStatus == "ready"
	var interrupted int
	if err := s.db.GetContext(ctx, &interrupted, `SELECT count(*) FROM runs r WHERE r.mailbox_id = $1
		AND r.id = (SELECT max(id) FROM runs WHERE mailbox_id = $1) AND r.status IN ('interrupted', 'running')`,
		mailboxID); err != nil {
		return nil, fmt.Errorf("count interrupted runs: %w", err)
	}
	st.NeedsResume = interrupted > 0 && !running && mb.ClosedAt == nil
	switch {
	case running:
	case sess == nil || sess.NativeID == "":
		st.ResumeReason = ReasonMissingResumeToken
	case !st.IsResumable:
		st.ResumeReason = ReasonNotResumable
	default:
		st.ResumeReason = ReasonAgentNotRunning
	}
	return st, nil
}

func (s *Store) latestSessionAny(ctx context.Context, mailboxID int64) (*sessionRow, error) {
	var r sessionRow
	err := s.db.GetContext(ctx, &r, `SELECT adapter, session_name, native_id, succeeded FROM llm_sessions
		WHERE mailbox_id = $1 ORDER BY id DESC LIMIT 1`, mailboxID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("latest session: %w", err)
	}
	return &r, nil
}

type sessionRow struct {
	Adapter   string `db:"adapter"`
	Name      string `db:"session_name"`
	NativeID  string `db:"native_id"`
	Succeeded bool   `db:"succeeded"`
}

// StatusHandler serves GET /mailboxes/{id}/session: the SessionStatus of a mailbox as JSON,
// 404 for an unknown mailbox, 400 for an id that is not a number. id is read with idOf (the
// router's path parameter).
func StatusHandler(s *Store, idOf func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(idOf(r), 10, 64)
		if err != nil {
			http.Error(w, "mailbox id must be a number", http.StatusBadRequest)
			return
		}
		st, err := s.SessionStatus(r.Context(), id)
		if errors.Is(err, sql.ErrNoRows) {
			http.Error(w, "no such mailbox", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, "status unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
}
