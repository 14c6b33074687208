package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

const mailboxColumns = `id, forge, repo, number, merge_request, state, issue_type, author, title,
labels, assignees, branch, mr_number, head_sha, data, wake_at, lease_owner, lease_expires_at,
closed_at, created_at, updated_at, lease_attempts, reconciled_at, issue_updated_at, mr_updated_at,
comments_since`

const sqlGetMailbox = `SELECT ` + mailboxColumns + ` FROM mailboxes WHERE id = $1`

// Get implements mailbox.Mailboxes.
func (s *Store) Get(ctx context.Context, id int64) (*mailbox.Mailbox, error) {
	var m mailbox.Mailbox
	err := s.db.GetContext(ctx, &m, sqlGetMailbox, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get mailbox %d: %w", id, mailbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get mailbox %d: %w", id, err)
	}
	return &m, nil
}

const sqlFindMailbox = `SELECT ` + mailboxColumns + ` FROM mailboxes
WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4`

// Find reads the mailbox of an issue or merge request; an error wrapping mailbox.ErrNotFound
// when there is none.
func (s *Store) Find(ctx context.Context, ref forge.IssueRef) (*mailbox.Mailbox, error) {
	var m mailbox.Mailbox
	err := s.db.GetContext(ctx, &m, sqlFindMailbox, ref.Forge, ref.Repo, ref.Number, ref.MergeRequest)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find mailbox %s: %w", ref, mailbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find mailbox %s: %w", ref, err)
	}
	return &m, nil
}

// SaveMailboxSQL writes a mailbox's row, fenced by the lease owner it was read with, $15 (NULL
// when it was read free): $1 id, $2 state, $3 issue_type, $4 author, $5 title, $6 labels, $7
// assignees, $8 branch, $9 mr_number, $10 head_sha, $11 data, $12 wake_at, $13 closed_at, $14
// updated_at. PostgreSQL and SQLite (3.39 and later) both compare NULLs with IS NOT DISTINCT
// FROM. A dialect's SaveProcessed builds on it.
const SaveMailboxSQL = `
UPDATE mailboxes SET state = $2, issue_type = $3, author = $4, title = $5, labels = $6,
	assignees = $7, branch = $8, mr_number = $9, head_sha = $10, data = $11, wake_at = $12,
	closed_at = $13, updated_at = $14
WHERE id = $1 AND lease_owner IS NOT DISTINCT FROM $15`

// Save implements mailbox.Mailboxes.
func (s *Store) Save(ctx context.Context, m *mailbox.Mailbox) error {
	return s.save(ctx, s.db, m, s.now())
}

// save writes the mailbox's row, updated at the instant at (also the time of its state change,
// when the state changes: migrations/0018_state_changes.sql), fenced by the lease the mailbox
// was read under (SaveMailboxSQL, fenced).
func (s *Store) save(ctx context.Context, q querier, m *mailbox.Mailbox, at time.Time) error {
	res, err := q.ExecContext(ctx, SaveMailboxSQL, saveArgs(m, at)...)
	return fenced(res, err, "save mailbox", m.ID)
}

// saveArgs returns SaveMailboxSQL's parameters, $1…$15, for m updated at the instant at.
func saveArgs(m *mailbox.Mailbox, at time.Time) []any {
	return []any{m.ID, m.State, m.Type, m.Author, m.Title, m.Labels, m.Assignees, m.Branch, m.MRNumber,
		m.HeadSHA, m.Data, m.WakeAt, m.ClosedAt, at, m.LeaseOwner}
}

// fenced is the outcome of a fenced save of mailbox id (SaveMailboxSQL): err wrapped, or an
// error wrapping mailbox.ErrLeaseLost when no row matched, because the lease changed hands
// since the mailbox was read (or the mailbox is gone).
func fenced(res sql.Result, err error, what string, id int64) error {
	if err != nil {
		return fmt.Errorf("%s %d: %w", what, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s %d: %w", what, id, err)
	}
	return fencedRows(n, what, id)
}

// fencedRows is fenced for a save that matched n rows.
func fencedRows(n int64, what string, id int64) error {
	if n == 0 {
		return fmt.Errorf("%s %d: its lease changed hands since it was read: %w", what, id, mailbox.ErrLeaseLost)
	}
	return nil
}

// SaveProcessed implements mailbox.Mailboxes: the mailbox's row and its events' marks, all at
// one instant, so that the timeline of the mailbox's page shows the decisions before the state
// change they made, and all or none of them. With the dialect's one statement
// (Dialect.SaveProcessed) when the events share one outcome; otherwise in one transaction, the save and one statement per outcome
// marking its events (markProcessedIn).
func (s *Store) SaveProcessed(ctx context.Context, m *mailbox.Mailbox, done []mailbox.Processed) error {
	now := s.now()
	if outcome, ids, ok := oneOutcome(done); ok && s.dialect.SaveProcessed != "" {
		return s.saveProcessedOnce(ctx, m, outcome, ids, now)
	}
	return s.withTx(ctx, func(q querier) error {
		if err := s.save(ctx, q, m, now); err != nil {
			return err
		}
		return s.markProcessedIn(ctx, q, done, now)
	})
}

// oneOutcome returns the outcome and the ids of done when its groups share one outcome and mark
// at least one event (Dialect.SaveProcessed's case: the ids are one array parameter, however
// many).
func oneOutcome(done []mailbox.Processed) (outcome string, ids []int64, ok bool) {
	for i, g := range done {
		if i > 0 && g.Outcome != outcome {
			return "", nil, false
		}
		outcome = g.Outcome
		ids = append(ids, g.IDs...)
	}
	return outcome, ids, len(ids) > 0
}

// saveProcessedOnce is SaveProcessed in the dialect's one statement (Dialect.SaveProcessed).
func (s *Store) saveProcessedOnce(ctx context.Context, m *mailbox.Mailbox, outcome string, ids []int64, now time.Time) error {
	list := make([]byte, 0, 2+12*len(ids))
	list = append(list, '{')
	for i, id := range ids {
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendInt(list, id, 10)
	}
	list = append(list, '}')
	var saved int64
	if err := s.getPrepared(ctx, &saved, s.dialect.SaveProcessed, append(saveArgs(m, now), outcome, string(list))...); err != nil {
		return fmt.Errorf("save mailbox %d and mark %d events processed: %w", m.ID, len(ids), err)
	}
	return fencedRows(saved, "save mailbox", m.ID)
}

// sqlSaveData writes a mailbox's data, fenced as SaveMailboxSQL by $3.
const sqlSaveData = `UPDATE mailboxes SET data = $2 WHERE id = $1 AND lease_owner IS NOT DISTINCT FROM $3`

// SaveData implements mailbox.Mailboxes, fenced like Save.
func (s *Store) SaveData(ctx context.Context, m *mailbox.Mailbox) error {
	res, err := s.db.ExecContext(ctx, sqlSaveData, m.ID, m.Data, m.LeaseOwner)
	return fenced(res, err, "save mailbox data", m.ID)
}

// sqlOpenMailboxes reads the index of open mailboxes (mailboxes_open) only.
const sqlOpenMailboxes = `SELECT id FROM mailboxes WHERE closed_at IS NULL`

// OpenMailboxes returns the ids of mailboxes that are not closed.
func (s *Store) OpenMailboxes(ctx context.Context) (map[int64]bool, error) {
	return s.idSet(ctx, "open mailboxes", sqlOpenMailboxes)
}

// sqlLeasedMailboxes reads the index of held leases (mailboxes_leased) only: $1 now.
const sqlLeasedMailboxes = `SELECT id FROM mailboxes WHERE lease_owner IS NOT NULL AND lease_expires_at > $1`

// LeasedMailboxes returns the ids of mailboxes whose lease is live (held and unexpired).
func (s *Store) LeasedMailboxes(ctx context.Context) (map[int64]bool, error) {
	return s.idSet(ctx, "leased mailboxes", sqlLeasedMailboxes, s.now())
}
