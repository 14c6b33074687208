package mailboxtest

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ mailbox.ShadowLog = (*ShadowLog)(nil)

// ShadowLog is an in-memory mailbox.ShadowLog. The zero value is not usable; call NewShadowLog.
type ShadowLog struct {
	now func() time.Time

	mu     sync.Mutex
	writes []mailbox.ShadowWrite // oldest first
	lastID int64
}

// NewShadowLog returns an empty log reading time from now (time.Now when nil).
func NewShadowLog(now func() time.Time) *ShadowLog {
	if now == nil {
		now = time.Now
	}
	return &ShadowLog{now: now}
}

// RecordShadow appends w with the next id; an edit replaces the earlier edit of its comment
// (mailbox.ShadowLog).
func (l *ShadowLog) RecordShadow(_ context.Context, w mailbox.ShadowWrite) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.Kind == mailbox.ShadowEditComment {
		l.writes = slices.DeleteFunc(l.writes, func(e mailbox.ShadowWrite) bool {
			return e.Kind == mailbox.ShadowEditComment && e.Target == w.Target && e.CommentID == w.CommentID
		})
	}
	l.lastID++
	w.ID = l.lastID
	if w.At.IsZero() {
		w.At = l.now()
	}
	w.Add, w.Remove, w.Detail = slices.Clone(w.Add), slices.Clone(w.Remove), maps.Clone(w.Detail)
	l.writes = append(l.writes, w)
	return w.ID, nil
}

// ShadowWrites returns the writes recorded for target, oldest first.
func (l *ShadowLog) ShadowWrites(_ context.Context, target forge.IssueRef) ([]mailbox.ShadowWrite, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []mailbox.ShadowWrite
	for _, w := range l.writes {
		if w.Target == target {
			out = append(out, w)
		}
	}
	return out, nil
}

// All returns every write recorded, oldest first.
func (l *ShadowLog) All() []mailbox.ShadowWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}
