package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

const sqlInsertQuestion = `
INSERT INTO questions (mailbox_id, round, qid, title, context, options, default_option, deadline_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`

// InsertQuestions implements mailbox.Questions.
func (s *Store) InsertQuestions(ctx context.Context, qs []mailbox.Question) error {
	return s.withTx(ctx, func(q querier) error {
		for _, x := range qs {
			_, err := q.ExecContext(ctx, sqlInsertQuestion,
				x.MailboxID, x.Round, x.QID, x.Title, x.Context, x.OptionsJSON, x.Default, x.DeadlineAt)
			if err != nil {
				return fmt.Errorf("insert question %s: %w", x.QID, err)
			}
		}
		return nil
	})
}

const sqlSetQuestionsDeadline = `UPDATE questions SET deadline_at = $3 WHERE mailbox_id = $1 AND round = $2`

// SetQuestionsDeadline implements mailbox.Questions.
func (s *Store) SetQuestionsDeadline(ctx context.Context, mailboxID int64, round int, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, sqlSetQuestionsDeadline, mailboxID, round, at); err != nil {
		return fmt.Errorf("set the questions' deadline: %w", err)
	}
	return nil
}

const sqlQuestions = `
SELECT id, mailbox_id, round, qid, title, context, options, default_option, deadline_at,
	answer, answered_by, answered_at
FROM questions WHERE mailbox_id = $1 AND round = $2 ORDER BY id`

// Questions implements mailbox.Questions.
func (s *Store) Questions(ctx context.Context, mailboxID int64, round int) ([]mailbox.Question, error) {
	var qs []mailbox.Question
	if err := s.db.SelectContext(ctx, &qs, sqlQuestions, mailboxID, round); err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	return qs, nil
}

const sqlAnswerQuestion = `UPDATE questions SET answer = $2, answered_by = $3, answered_at = $4 WHERE id = $1`

// AnswerQuestion implements mailbox.Questions.
func (s *Store) AnswerQuestion(ctx context.Context, id int64, answer, by string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, sqlAnswerQuestion, id, answer, by, at); err != nil {
		return fmt.Errorf("answer question %d: %w", id, err)
	}
	return nil
}
