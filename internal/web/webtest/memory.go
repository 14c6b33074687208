// Package webtest holds test doubles for the web pages: an in-memory Reader, LiveLogs,
// Settings and Controls, and a headless Chromium that loads a page, returns its DOM and saves a
// screenshot, or drives a tab (Tab) that signs in and submits the pages' forms.
package webtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/alfred-bot/alfred/internal/web"
)

// Memory is an in-memory web.Reader, web.LiveLogs and web.Settings seeded by the test. It is
// safe for concurrent use.
type Memory struct {
	mu        sync.Mutex
	mailboxes []web.MailboxDetail
	runs      map[int64]web.RunDetail
	logs      map[string]string
	settings  map[string][]web.Setting
	actions   []Action
	draining  bool
	pausedBy  string
	replicas  []web.Replica
}

var (
	_ web.Reader   = (*Memory)(nil)
	_ web.LiveLogs = (*Memory)(nil)
	_ web.Settings = (*Memory)(nil)
)

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{runs: map[int64]web.RunDetail{}, logs: map[string]string{}, settings: map[string][]web.Setting{}}
}

// AddMailbox stores mb (its Runs are stored as runs too, with mb's repo and number).
func (m *Memory) AddMailbox(mb web.MailboxDetail) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mailboxes = append(m.mailboxes, mb)
	for _, r := range mb.Runs {
		r.MailboxID = mb.ID
		d := m.runs[r.ID]
		d.RunSummary, d.Repo, d.Number = r, mb.Repo, mb.Number
		m.runs[r.ID] = d
	}
}

// SetOutput sets the stored output of run id.
func (m *Memory) SetOutput(id int64, out string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.runs[id]
	d.Output = out
	m.runs[id] = d
}

// SetLog sets the live log of container.
func (m *Memory) SetLog(container, log string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logs[container] = log
}

// SetSettings sets what Effective answers for project.
func (m *Memory) SetSettings(project string, s []web.Setting) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settings[project] = s
}

// Mailboxes returns a page of the stored mailboxes, last added first.
func (m *Memory) Mailboxes(_ context.Context, offset, limit int) ([]web.MailboxSummary, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []web.MailboxSummary
	for _, mb := range slices.Backward(m.mailboxes) {
		if len(out) == limit {
			break
		}
		if offset > 0 {
			offset--
			continue
		}
		out = append(out, mb.MailboxSummary)
	}
	return out, nil
}

// Mailbox returns the stored mailbox id.
func (m *Memory) Mailbox(_ context.Context, id int64) (*web.MailboxDetail, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mb := range m.mailboxes {
		if mb.ID == id {
			return &mb, nil
		}
	}
	return nil, fmt.Errorf("mailbox %d: %w", id, web.ErrNotFound)
}

// Run returns the stored run id.
func (m *Memory) Run(_ context.Context, id int64) (*web.RunDetail, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return nil, fmt.Errorf("run %d: %w", id, web.ErrNotFound)
	}
	return &r, nil
}

// RunLog returns the live log set for container.
func (m *Memory) RunLog(_ context.Context, container string, maxBytes int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[container]
	if !ok {
		return "", fmt.Errorf("container %s: %w", container, web.ErrNotFound)
	}
	if len(l) > maxBytes {
		l = l[len(l)-maxBytes:]
	}
	return l, nil
}

// Effective returns the settings set for project, else those set for "".
func (m *Memory) Effective(project string) ([]web.Setting, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.settings[project]; ok {
		return s, nil
	}
	return m.settings[""], nil
}

// Projects lists the projects with settings of their own.
func (m *Memory) Projects() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for p := range m.settings {
		if p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
