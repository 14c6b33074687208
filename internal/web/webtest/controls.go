package webtest

import (
	"context"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/internal/web"
)

var _ web.Controls = (*Memory)(nil)

// Action is one control Memory carried out: what, on which target, by whom.
type Action struct {
	What, Target, By string
}

// Actions returns the controls carried out so far, oldest first.
func (m *Memory) Actions() []Action {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Action(nil), m.actions...)
}

// act records a on the mailboxes it concerns (their timelines) and in Actions.
func (m *Memory) act(a Action, text string, match func(*web.MailboxDetail) bool, change func(*web.MailboxDetail)) error {
	found := false
	for i := range m.mailboxes {
		mb := &m.mailboxes[i]
		if !match(mb) {
			continue
		}
		found = true
		change(mb)
		mb.Timeline = append(mb.Timeline, web.TimelineEntry{At: time.Now(), Kind: "operator", Text: a.By + " " + text})
	}
	if !found {
		return fmt.Errorf("%s: %w", a.Target, web.ErrNotFound)
	}
	m.actions = append(m.actions, a)
	return nil
}

func byID(id int64) func(*web.MailboxDetail) bool {
	return func(mb *web.MailboxDetail) bool { return mb.ID == id }
}

func byProject(forgeName, repo string) func(*web.MailboxDetail) bool {
	return func(mb *web.MailboxDetail) bool { return mb.Forge == forgeName && mb.Repo == repo }
}

// PauseMailbox implements web.Controls.
func (m *Memory) PauseMailbox(_ context.Context, id int64, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.act(Action{"pause", fmt.Sprint(id), by}, "paused the mailbox", byID(id),
		func(mb *web.MailboxDetail) { mb.Paused, mb.PausedBy = true, by })
}

// ResumeMailbox implements web.Controls.
func (m *Memory) ResumeMailbox(_ context.Context, id int64, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.act(Action{"resume", fmt.Sprint(id), by}, "resumed the mailbox", byID(id),
		func(mb *web.MailboxDetail) { mb.Paused, mb.PausedBy = false, "" })
}

// PauseProject implements web.Controls.
func (m *Memory) PauseProject(_ context.Context, forgeName, repo, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.act(Action{"pause project", forgeName + ":" + repo, by}, "paused the project", byProject(forgeName, repo),
		func(mb *web.MailboxDetail) { mb.ProjectPaused = true })
}

// ResumeProject implements web.Controls.
func (m *Memory) ResumeProject(_ context.Context, forgeName, repo, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.act(Action{"resume project", forgeName + ":" + repo, by}, "resumed the project", byProject(forgeName, repo),
		func(mb *web.MailboxDetail) { mb.ProjectPaused = false })
}

// CancelRun implements web.Controls: the run becomes interrupted, as the runner's stop leaves it.
func (m *Memory) CancelRun(_ context.Context, id int64, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok || !r.Running() {
		return fmt.Errorf("run %d is not running: %w", id, web.ErrNotFound)
	}
	r.Status, r.Outcome, r.FinishedAt = "interrupted", "cancelled by "+by, time.Now()
	m.runs[id] = r
	return m.act(Action{"cancel", fmt.Sprint(id), by}, fmt.Sprintf("cancelled run %d", id), byID(r.MailboxID),
		func(mb *web.MailboxDetail) {
			mb.Running = false
			for i := range mb.Runs {
				if mb.Runs[i].ID == id {
					mb.Runs[i] = r.RunSummary
				}
			}
		})
}

// Drain implements web.Controls.
func (m *Memory) Drain(_ context.Context, on bool, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.draining = on
	m.actions = append(m.actions, Action{"drain", fmt.Sprint(on), by})
	return nil
}

// Draining implements web.Controls.
func (m *Memory) Draining() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

// PauseAll implements web.Controls.
func (m *Memory) PauseAll(_ context.Context, on bool, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pausedBy = ""
	if on {
		m.pausedBy = by
	}
	m.actions = append(m.actions, Action{"pause all", fmt.Sprint(on), by})
	return nil
}

// SetReplicas sets the replicas Installation returns.
func (m *Memory) SetReplicas(rs ...web.Replica) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replicas = rs
}

// Installation implements web.Controls: the pause of all claims and the replicas SetReplicas
// set.
func (m *Memory) Installation(context.Context) (web.Installation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return web.Installation{Paused: m.pausedBy != "", PausedBy: m.pausedBy, Replicas: m.replicas}, nil
}
