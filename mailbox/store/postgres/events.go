package postgres

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

const sqlEnsureMailbox = `
INSERT INTO mailboxes (forge, repo, number, merge_request, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (forge, repo, number, merge_request) DO UPDATE SET updated_at = mailboxes.updated_at
RETURNING id`

const sqlMailboxByMR = `
SELECT id FROM mailboxes
WHERE forge = $1 AND repo = $2 AND merge_request = FALSE AND mr_number = $3
ORDER BY id LIMIT 1`

const sqlMailboxByBranch = `
SELECT id FROM mailboxes
WHERE forge = $1 AND repo = $2 AND merge_request = FALSE AND branch = $3
ORDER BY id DESC LIMIT 1`

const sqlMailboxBySHA = `
SELECT id FROM mailboxes
WHERE forge = $1 AND repo = $2 AND merge_request = FALSE AND head_sha = $3
ORDER BY id DESC LIMIT 1`

const sqlInsertEvent = `
INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING`

// Deliver implements mailbox.Inbox (and webhook.Inbox): the mailbox is resolved and the event
// inserted in one transaction; the unique (forge, delivery_id, body_hash) constraint makes a
// duplicate insert nothing.
func (s *Store) Deliver(ctx context.Context, ev forge.Event) (duplicate bool, err error) {
	if ev.BodyHash == "" {
		payload, _ := json.Marshal(ev)
		sum := sha256.Sum256(payload)
		ev.BodyHash = hex.EncodeToString(sum[:])
	}
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = s.now()
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("encode event: %w", err)
	}
	err = s.withTx(ctx, func(q querier) error {
		id, err := s.resolve(ctx, q, ev)
		if err != nil {
			return err
		}
		res, err := q.ExecContext(ctx, sqlInsertEvent, id, ev.Forge, ev.DeliveryID, ev.BodyHash,
			string(ev.Type), string(payload), ev.ReceivedAt)
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		n, _ := res.RowsAffected()
		duplicate = n == 0
		if duplicate {
			return nil
		}
		var others int
		if err := q.GetContext(ctx, &others, sqlSameDeliveryOtherBody, ev.Forge, ev.DeliveryID, ev.BodyHash); err != nil {
			return fmt.Errorf("look for the delivery id: %w", err)
		}
		if others > 0 {
			s.log.Warn("a delivery id came again with another body; both are kept", "forge", ev.Forge,
				"delivery_id", ev.DeliveryID, "event", ev.Type, "repo", ev.Target.Repo, "issue", ev.Target.Number)
		}
		return nil
	})
	return duplicate, err
}

const sqlSameDeliveryOtherBody = `SELECT count(*) FROM events WHERE forge = $1 AND delivery_id = $2 AND body_hash <> $3`

// resolve finds (or creates) the mailbox an event belongs to; see mailbox.Inbox.Deliver.
func (s *Store) resolve(ctx context.Context, q querier, ev forge.Event) (int64, error) {
	t := ev.Target
	lookup := func(query string, arg any) (int64, bool, error) {
		var id int64
		err := q.GetContext(ctx, &id, query, t.Forge, t.Repo, arg)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("find mailbox: %w", err)
		}
		return id, true, nil
	}
	if t.MergeRequest || ev.Type == forge.EventPipeline {
		if t.Number != 0 {
			if id, ok, err := lookup(sqlMailboxByMR, t.Number); ok || err != nil {
				return id, err
			}
		}
		branch, sha := mailbox.EventBranch(ev)
		if branch != "" {
			if id, ok, err := lookup(sqlMailboxByBranch, branch); ok || err != nil {
				return id, err
			}
		}
		if sha != "" {
			if id, ok, err := lookup(sqlMailboxBySHA, sha); ok || err != nil {
				return id, err
			}
		}
		if t.Number == 0 {
			return 0, mailbox.ErrNoMailboxForPipeline(ev)
		}
	}
	var id int64
	if err := q.GetContext(ctx, &id, sqlEnsureMailbox, t.Forge, t.Repo, t.Number, t.MergeRequest, s.now()); err != nil {
		return 0, fmt.Errorf("ensure mailbox: %w", err)
	}
	return id, nil
}

const sqlPendingEvents = `
SELECT id, mailbox_id, payload, received_at FROM events
WHERE mailbox_id = $1 AND processed_at IS NULL ORDER BY id`

// PendingEvents implements mailbox.Inbox.
func (s *Store) PendingEvents(ctx context.Context, mailboxID int64) ([]mailbox.StoredEvent, error) {
	var rows []mailbox.StoredEvent
	if err := s.db.SelectContext(ctx, &rows, sqlPendingEvents, mailboxID); err != nil {
		return nil, fmt.Errorf("list pending events: %w", err)
	}
	for i := range rows {
		if err := json.Unmarshal([]byte(rows[i].Payload), &rows[i].Event); err != nil {
			return nil, fmt.Errorf("decode event %d: %w", rows[i].ID, err)
		}
	}
	return rows, nil
}

const sqlMarkProcessed = `UPDATE events SET processed_at = $3, outcome = $2 WHERE id = $1`

// MarkProcessed implements mailbox.Inbox.
func (s *Store) MarkProcessed(ctx context.Context, eventID int64, outcome string) error {
	return s.markProcessed(ctx, s.db, eventID, outcome)
}

func (s *Store) markProcessed(ctx context.Context, q querier, eventID int64, outcome string) error {
	if _, err := q.ExecContext(ctx, sqlMarkProcessed, eventID, outcome, s.now()); err != nil {
		return fmt.Errorf("mark event %d processed: %w", eventID, err)
	}
	return nil
}
