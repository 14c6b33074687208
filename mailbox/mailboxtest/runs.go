package mailboxtest

import (
	"context"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

// InsertQuestions implements mailbox.Questions.
func (s *Store) InsertQuestions(_ context.Context, qs []mailbox.Question) error {
	s.mu.Lock()
	defer s.mu.Unlock()
next:
	for _, q := range qs {
		for _, x := range s.questions {
			if x.MailboxID == q.MailboxID && x.Round == q.Round && x.QID == q.QID {
				continue next
			}
		}
		q.ID = int64(len(s.questions) + 1)
		q.Answer, q.AnsweredBy, q.AnsweredAt = nil, nil, nil
		s.questions = append(s.questions, q)
	}
	return nil
}

// SetQuestionsDeadline implements mailbox.Questions.
func (s *Store) SetQuestionsDeadline(_ context.Context, mailboxID int64, round int, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.questions {
		if s.questions[i].MailboxID == mailboxID && s.questions[i].Round == round {
			s.questions[i].DeadlineAt = at
		}
	}
	return nil
}

// Questions implements mailbox.Questions.
func (s *Store) Questions(_ context.Context, mailboxID int64, round int) ([]mailbox.Question, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mailbox.Question
	for _, q := range s.questions {
		if q.MailboxID == mailboxID && q.Round == round {
			out = append(out, q)
		}
	}
	return out, nil
}

// AnswerQuestion implements mailbox.Questions.
func (s *Store) AnswerQuestion(_ context.Context, id int64, answer, by string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 1 || int(id) > len(s.questions) {
		return nil
	}
	q := &s.questions[id-1]
	q.Answer, q.AnsweredBy, q.AnsweredAt = &answer, &by, &at
	return nil
}

// StartRun implements mailbox.Runs.
func (s *Store) StartRun(_ context.Context, r *mailbox.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	attempt := 1
	for _, x := range s.runs {
		if x.MailboxID == r.MailboxID && x.Phase == r.Phase && x.Step == r.Step {
			attempt++
		}
	}
	row := mailbox.Run{ID: int64(len(s.runs) + 1), MailboxID: r.MailboxID, Phase: r.Phase, Step: r.Step,
		Attempt: attempt, Status: mailbox.RunRunning, Container: r.Container, StartedAt: s.now(), Applied: true}
	s.runs = append(s.runs, row)
	r.ID, r.Attempt, r.Status, r.StartedAt = row.ID, row.Attempt, row.Status, row.StartedAt
	return nil
}

func (s *Store) run(id int64) (*mailbox.Run, error) {
	if id < 1 || int(id) > len(s.runs) {
		return nil, fmt.Errorf("run %d: no such run", id)
	}
	return &s.runs[id-1], nil
}

// FinishRun implements mailbox.Runs.
func (s *Store) FinishRun(_ context.Context, r *mailbox.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	row, err := s.run(r.ID)
	if err != nil {
		return err
	}
	now := s.now()
	row.Status, row.Container, row.ExitCode, row.Outcome = r.Status, r.Container, r.ExitCode, r.Outcome
	row.Output, row.Result, row.FinishedAt = r.Output, r.Result, &now
	return nil
}

// Runs lists a mailbox's runs, oldest first.
func (s *Store) Runs(_ context.Context, mailboxID int64) ([]mailbox.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mailbox.Run
	for _, r := range s.runs {
		if r.MailboxID == mailboxID {
			out = append(out, r)
		}
	}
	return out, nil
}

// InterruptRuns implements mailbox.Runs.
func (s *Store) InterruptRuns(_ context.Context, mailboxID int64) ([]mailbox.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []mailbox.Run
	for i := range s.runs {
		r := &s.runs[i]
		if r.MailboxID == mailboxID && r.Status == mailbox.RunRunning {
			r.Status, r.FinishedAt, r.Outcome = mailbox.RunInterrupted, &now, "interrupted: the worker running it stopped"
			out = append(out, *r)
		}
	}
	return out, nil
}

// RunningRuns implements mailbox.Runs.
func (s *Store) RunningRuns(_ context.Context, mailboxID int64) ([]mailbox.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mailbox.Run
	for _, r := range s.runs {
		if r.MailboxID == mailboxID && r.Status == mailbox.RunRunning {
			out = append(out, r)
		}
	}
	return out, nil
}

// FinishRecoveredRun implements mailbox.Runs.
func (s *Store) FinishRecoveredRun(_ context.Context, r *mailbox.Run) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	row, err := s.run(r.ID)
	if err != nil || row.Status != mailbox.RunRunning {
		return false, nil
	}
	now := s.now()
	row.Status, row.Container, row.ExitCode, row.Outcome = r.Status, r.Container, r.ExitCode, r.Outcome
	row.Output, row.Result, row.HeadSHA, row.Applied = r.Output, r.Result, r.HeadSHA, r.Applied
	row.Resumable, row.NotResumableReason, row.FinishedAt = r.Resumable, r.NotResumableReason, &now
	return true, nil
}

// UnappliedRun implements mailbox.Runs.
func (s *Store) UnappliedRun(_ context.Context, mailboxID int64, phase, step string) (*mailbox.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.runs) - 1; i >= 0; i-- {
		r := s.runs[i]
		if r.MailboxID == mailboxID && r.Phase == phase && r.Step == step {
			if r.Applied || r.Status == mailbox.RunRunning {
				return nil, nil
			}
			return &r, nil
		}
	}
	return nil, nil
}

// SaveApplied implements mailbox.Runs.
func (s *Store) SaveApplied(_ context.Context, mb *mailbox.Mailbox, runID int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	row, err := s.run(runID)
	if err != nil {
		return err
	}
	if err := s.save(mb); err != nil {
		return err
	}
	row.Applied = true
	return nil
}

// DiscardUnapplied implements mailbox.Runs.
func (s *Store) DiscardUnapplied(_ context.Context, mb *mailbox.Mailbox, keepPhase, keepStep string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.fenced(mb); err != nil {
		return nil // the lease changed hands: the new holder's runs are its own
	}
	for i := range s.runs {
		r := s.runs[i]
		if r.MailboxID == mb.ID && (keepPhase == "" || r.Phase != keepPhase || r.Step != keepStep) {
			s.runs[i].Applied = true
		}
	}
	return nil
}

// PostedComment implements mailbox.Comments.
func (s *Store) PostedComment(_ context.Context, mailboxID int64, key string) (*mailbox.PostedComment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.comments[commentKey{mailboxID, key}]
	if !ok {
		return nil, nil
	}
	return &c, nil
}

// RecordComment implements mailbox.Comments.
func (s *Store) RecordComment(_ context.Context, c mailbox.PostedComment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.comments[commentKey{c.MailboxID, c.Key}] = c
	return nil
}

// RequestCancel records that by asked to cancel run id while it runs (the store's
// RequestCancel); an error wrapping mailbox.ErrNotFound when no such run is running.
func (s *Store) RequestCancel(_ context.Context, id int64, by string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.run(id)
	if err != nil || r.Status != mailbox.RunRunning {
		return fmt.Errorf("cancel run %d: %w", id, mailbox.ErrNotFound)
	}
	if s.cancels == nil {
		s.cancels = map[int64]string{}
	}
	s.cancels[id] = by
	return nil
}

// CancelRequested implements mailbox.Controls.
func (s *Store) CancelRequested(_ context.Context, id int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancels[id], nil
}
