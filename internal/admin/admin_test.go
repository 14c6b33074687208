package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/mailbox"
)

func TestStatusReasons(t *testing.T) {
	t.Parallel()
	closed := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	open := &mailbox.Mailbox{ID: 1, State: mailbox.StateInDevelopment, Branch: "agent/issue-1"}
	done := &mailbox.Mailbox{ID: 1, State: mailbox.StateDone, ClosedAt: &closed}
	ok := &admin.SessionRow{Adapter: "claude-code", Name: "agent/issue-1", NativeID: "n1", Succeeded: true}
	for _, tc := range []struct {
		name      string
		facts     admin.SessionFacts
		reason    string
		resumable bool
		needs     bool
	}{
		{"no session", admin.SessionFacts{Mailbox: open}, admin.ReasonMissingResumeToken, false, false},
		{"resumable, interrupted", admin.SessionFacts{Mailbox: open, Session: ok, LastRunUnfinished: true},
			admin.ReasonAgentNotRunning, true, true},
		{"failed session", admin.SessionFacts{Mailbox: open, Session: &admin.SessionRow{NativeID: "n1"}},
			admin.ReasonNotResumable, false, false},
		{"closed mailbox", admin.SessionFacts{Mailbox: done, Session: ok, LastRunUnfinished: true},
			admin.ReasonNotResumable, false, false},
		{"container running", admin.SessionFacts{Mailbox: open, Session: ok, LastRunUnfinished: true,
			Container: &admin.ContainerRow{Status: "ready", Name: "c"}}, "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := admin.Status(&tc.facts)
			require.Equal(t, tc.reason, st.ResumeReason)
			require.Equal(t, tc.resumable, st.IsResumable)
			require.Equal(t, tc.needs, st.NeedsResume)
		})
	}
}

type reader map[int64]*admin.SessionFacts

func (r reader) SessionFacts(_ context.Context, id int64) (*admin.SessionFacts, error) {
	if id == 99 {
		return nil, fmt.Errorf("database down")
	}
	f, ok := r[id]
	if !ok {
		return nil, fmt.Errorf("get mailbox %d: %w", id, mailbox.ErrNotFound)
	}
	return f, nil
}

func TestSessionHandler(t *testing.T) {
	t.Parallel()
	r := reader{1: {Mailbox: &mailbox.Mailbox{ID: 1, State: mailbox.StateInCI, Branch: "agent/issue-1"}}}
	mux := http.NewServeMux()
	mux.Handle("GET /mailboxes/{id}/session", admin.SessionHandler(r, func(req *http.Request) string { return req.PathValue("id") }))
	get := func(id string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/mailboxes/"+id+"/session", nil))
		return w
	}
	w := get("1")
	require.Equal(t, http.StatusOK, w.Code)
	var st admin.SessionStatus
	require.NoError(t, json.NewDecoder(w.Body).Decode(&st))
	require.Equal(t, "agent/issue-1", st.Branch)
	require.Equal(t, mailbox.StateInCI, st.State)
	require.Equal(t, http.StatusNotFound, get("2").Code)
	require.Equal(t, http.StatusBadRequest, get("x").Code)
	require.Equal(t, http.StatusServiceUnavailable, get("99").Code)
}
