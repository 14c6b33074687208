// Package admin serves the operator's read-only view of Alfred: today
// GET /mailboxes/{id}/session, the agent session state of one mailbox as JSON. It reads through
// the narrow SessionReader interface, which the store implements.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

// Resume reasons of SessionStatus: why a mailbox's session is not being resumed right now.
const (
	ReasonAgentNotRunning    = "agent_not_running"    // resumable, no container runs: the next run resumes
	ReasonNotResumable       = "not_resumable"        // the last session cannot be resumed (failed, or the adapter cannot)
	ReasonMissingResumeToken = "missing_resume_token" // no native session id was recorded
)

// SessionFacts is what the store knows about a mailbox's session: the rows SessionStatus is
// computed from.
type SessionFacts struct {
	Mailbox *mailbox.Mailbox
	// Session is the latest session record of any outcome, nil when none.
	Session *SessionRow
	// Container is the latest container record (executors row), nil when none.
	Container *ContainerRow
	// LastRunUnfinished: the mailbox's latest run is interrupted or still running.
	LastRunUnfinished bool
}

// SessionRow is the part of an llm_sessions row the status shows.
type SessionRow struct {
	Adapter   string `db:"adapter"`
	Name      string `db:"session_name"`
	NativeID  string `db:"native_id"`
	Succeeded bool   `db:"succeeded"`
}

// ContainerRow is the part of an executors row the status shows.
type ContainerRow struct {
	Status    string    `db:"status"`
	Runtime   string    `db:"runtime"`
	Name      string    `db:"container_name"`
	Workspace string    `db:"workspace_path"`
	LastSeen  time.Time `db:"last_seen_at"`
}

// SessionReader reads the facts of one mailbox's session.
type SessionReader interface {
	// SessionFacts returns the facts of mailbox id; an error wrapping mailbox.ErrNotFound when
	// the mailbox does not exist, any other error when the store is unavailable.
	SessionFacts(ctx context.Context, mailboxID int64) (*SessionFacts, error)
}

// SessionStatus is the answer of GET /mailboxes/{id}/session.
type SessionStatus struct {
	MailboxID int64         `json:"mailbox_id"`
	State     mailbox.State `json:"state"`
	Branch    string        `json:"branch"`
	// SessionName is the session's name (the branch), NativeID the CLI's id, Adapter the CLI.
	SessionName string `json:"session_name,omitempty"`
	NativeID    string `json:"native_id,omitempty"`
	Adapter     string `json:"adapter,omitempty"`
	// IsResumable: the latest session completed and has a native id, and the mailbox is open.
	IsResumable bool `json:"is_resumable"`
	// NeedsResume: the latest run of the open mailbox was interrupted and no container runs it.
	NeedsResume bool `json:"needs_resume"`
	// ResumeReason is one of the Reason constants, "" while a container runs.
	ResumeReason string `json:"resume_reason,omitempty"`
	// The latest container of the mailbox: its record's status, runtime, name, worktree and
	// last heartbeat.
	ContainerStatus string     `json:"container_status,omitempty"`
	Runtime         string     `json:"runtime,omitempty"`
	Container       string     `json:"container,omitempty"`
	WorktreePath    string     `json:"worktree_path,omitempty"`
	LastSeenAt      *time.Time `json:"last_seen_at,omitempty"`
}

// Status computes the SessionStatus of f.
func Status(f *SessionFacts) *SessionStatus {
	mb := f.Mailbox
	st := &SessionStatus{MailboxID: mb.ID, State: mb.State, Branch: mb.Branch}
	if sess := f.Session; sess != nil {
		st.SessionName, st.NativeID, st.Adapter = sess.Name, sess.NativeID, sess.Adapter
		// A closed mailbox's session state is removed: nothing is resumable any more.
		st.IsResumable = sess.Succeeded && sess.NativeID != "" && mb.ClosedAt == nil
	}
	if c := f.Container; c != nil {
		st.ContainerStatus, st.Runtime, st.Container, st.WorktreePath = c.Status, c.Runtime, c.Name, c.Workspace
		st.LastSeenAt = &c.LastSeen
	}
	running := st.ContainerStatus == "starting" || st.ContainerStatus == "ready"
	st.NeedsResume = f.LastRunUnfinished && !running && mb.ClosedAt == nil
	switch {
	case running:
	case f.Session == nil || f.Session.NativeID == "":
		st.ResumeReason = ReasonMissingResumeToken
	case !st.IsResumable:
		st.ResumeReason = ReasonNotResumable
	default:
		st.ResumeReason = ReasonAgentNotRunning
	}
	return st
}

// SessionHandler serves GET /mailboxes/{id}/session: the SessionStatus of a mailbox as JSON,
// 404 for an unknown mailbox, 400 for an id that is not a number, 503 when the store does not
// answer. id is read with idOf (the router's path parameter).
func SessionHandler(r SessionReader, idOf func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, err := strconv.ParseInt(idOf(req), 10, 64)
		if err != nil {
			http.Error(w, "mailbox id must be a number", http.StatusBadRequest)
			return
		}
		f, err := r.SessionFacts(req.Context(), id)
		if errors.Is(err, mailbox.ErrNotFound) {
			http.Error(w, "no such mailbox", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, "status unavailable", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Status(f))
	})
}
