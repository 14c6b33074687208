package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// sqlCreateMailbox creates the mailbox of an issue or merge request unless it exists.
const sqlCreateMailbox = `
INSERT INTO mailboxes (forge, repo, number, merge_request, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (forge, repo, number, merge_request) DO NOTHING`

// sqlFindBotMailbox finds the issue mailbox whose merge request an event is about: by the
// merge request's number, else its source branch, else its head commit; 0 when none. The
// branch finds a mailbox only when the event names no merge request or the mailbox has none
// yet (its merge request just opened, its number not saved): a merge request of the same
// branch name with another number (from a fork) is someone else's, with a mailbox of its own. Each
// look-up reads its partial index (mailboxes_mr, mailboxes_branch, mailboxes_head_sha), whose
// condition (a number other than 0, a branch or commit that is not empty) the statement
// repeats: it also skips a look-up given 0 or an empty text, and it is true whatever the
// parameters are, so the prepared statement's generic plan reads the indexes and PostgreSQL
// keeps that plan instead of planning every call anew for its values.
const sqlFindBotMailbox = `
SELECT coalesce(
	(SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND merge_request = FALSE
		AND mr_number <> 0 AND mr_number = $3 ORDER BY id LIMIT 1),
	(SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND merge_request = FALSE
		AND branch <> '' AND branch = $4 AND (mr_number = 0 OR $3 = 0) ORDER BY id DESC LIMIT 1),
	(SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND merge_request = FALSE
		AND head_sha <> '' AND head_sha = $5 ORDER BY id DESC LIMIT 1),
	0)`

// FindIssueMailbox returns the id of the issue mailbox whose merge request an event is
// about (Deliver's look-up for an event on a merge request or a pipeline): by the merge
// request's number mrNumber, else its source branch, else its head commit sha (each skipped
// when 0 or empty); 0 when none matches. The statement is prepared once and kept.
func (s *Store) FindIssueMailbox(ctx context.Context, forgeName, repo string, mrNumber int64, branch, sha string) (int64, error) {
	var id int64
	err := s.getPrepared(ctx, &id, sqlFindBotMailbox, forgeName, repo, mrNumber, branch, sha)
	return id, err
}

const sqlMailboxID = `SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4`

const sqlInsertEvent = `
INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING`

const sqlEventStored = `SELECT EXISTS (SELECT 1 FROM events WHERE forge = $1 AND delivery_id = $2 AND body_hash = $3)`

// sqlSameDeliveryOtherBody counts the events of a delivery id stored with another body.
const sqlSameDeliveryOtherBody = `SELECT count(*) FROM events WHERE forge = $1 AND delivery_id = $2 AND body_hash <> $3`

// Deliver implements mailbox.Inbox (and webhook.Inbox) in one statement: a plain insert into a
// mailbox this process has stored into before (its id remembered; grouped with the concurrent
// deliveries, batch.go), else one statement that finds or creates the mailbox and inserts the
// event. Events on a merge request or pipeline
// first look the issue's mailbox up (mailbox.Inbox.Deliver says how). The unique
// (forge, delivery_id, body_hash) constraint makes a forge's retry of a delivery insert
// nothing, while identical bodies under new delivery ids (assign, unassign, assign again) are
// all stored; a delivery id that comes again with another body is stored too and logged. A
// value the engine refuses (invalid text, an identifier over an index's size) returns an error
// wrapping forge.ErrBadPayload.
func (s *Store) Deliver(ctx context.Context, ev forge.Event) (duplicate bool, err error) {
	duplicate, _, err = s.Arrive(ctx, ev)
	return duplicate, err
}

// Arrive implements mailbox.ArrivalInbox: Deliver, reporting whether the new event waits for a
// pass. The grouped insert (batch.go) records an inert event processed on arrival; the first
// event of a mailbox this process has not stored into, and an event on a merge request, always
// wait.
func (s *Store) Arrive(ctx context.Context, ev forge.Event) (duplicate, pending bool, err error) {
	res := s.deliver(ctx, &ev)
	if res.err != nil || res.duplicate {
		return res.duplicate, false, res.err
	}
	if !res.checked {
		if res.others, err = s.otherBodies(ctx, ev); err != nil {
			s.log.Warn("could not look for the delivery id's other bodies", "forge", ev.Forge, "delivery_id", ev.DeliveryID, "err", err)
		}
	}
	if res.others {
		s.log.Warn("a delivery id came again with another body; both are kept", "forge", ev.Forge,
			"delivery_id", ev.DeliveryID, "event", ev.Type, "repo", ev.Target.Repo, "issue", ev.Target.Number)
	}
	return false, !res.atRest, nil
}

// otherBodies reports whether events of ev's delivery id are stored with another body, for
// the deliveries not inserted by Dialect.InsertEvents (which looks in the same statement). Its
// query is prepared once (one round trip instead of a parse and an execution).
func (s *Store) otherBodies(ctx context.Context, ev forge.Event) (bool, error) {
	args := []any{ev.Forge, ev.DeliveryID, ev.BodyHash}
	var others int
	var err error
	if stmt := s.prepared(ctx, sqlSameDeliveryOtherBody); stmt != nil {
		err = stmt.QueryRowContext(ctx, args...).Scan(&others)
	} else {
		err = s.db.GetContext(ctx, &others, sqlSameDeliveryOtherBody, args...)
	}
	return others > 0, err
}

// deliver stores ev (Deliver), filling its body hash and receive time when unset.
func (s *Store) deliver(ctx context.Context, evp *forge.Event) insertRes {
	ev := *evp
	defer func() { *evp = ev }()
	if ev.BodyHash == "" {
		payload, _ := json.Marshal(ev)
		sum := sha256.Sum256(payload)
		ev.BodyHash = hex.EncodeToString(sum[:])
	}
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = s.now()
	}
	payload, err := encodeEvent(ev)
	if err != nil {
		return insertRes{err: fmt.Errorf("%w: encode event: %w", forge.ErrBadPayload, err)} // never storable
	}
	t := ev.Target
	if t.MergeRequest || ev.Type == forge.EventPipeline {
		branch, sha := mailbox.EventBranch(ev)
		id, err := s.FindIssueMailbox(ctx, t.Forge, t.Repo, t.Number, branch, sha)
		if err != nil {
			return insertRes{err: s.storeError("find mailbox", err)}
		}
		if id == 0 && (t.Number == 0 || ev.Type == forge.EventPipeline) {
			// A merge request that is not Alfred's acts on no pipeline: nothing is stored.
			return insertRes{err: mailbox.ErrNoMailboxForPipeline(ev)}
		}
		if id != 0 {
			return s.batchInsert(ctx, id, ev, payload, false)
		}
	}
	// A mailbox this process has seen: one plain insert, an inert event recorded processed when
	// the mailbox is at rest (mailbox.ArrivalInbox). A mailbox deleted since makes the insert
	// fail on the foreign key (23503); it is forgotten and looked up again.
	key := mailboxKey{forge: t.Forge, repo: t.Repo, number: t.Number, mergeRequest: t.MergeRequest}
	if id, ok := s.ids.get(key); ok {
		res := s.batchInsert(ctx, id, ev, payload, mailbox.InertAtRest(ev))
		if !s.isForeignKeyViolation(res.err) {
			return res
		}
		s.ids.forget(key)
	}
	if s.dialect.DeliverToIssue == "" {
		return s.deliverToNewMailbox(ctx, key, ev, payload)
	}
	// Twice at most: a first attempt that raced another delivery creating the mailbox inserts
	// nothing, and the second sees the mailbox.
	for range 2 {
		res, err := s.db.ExecContext(ctx, s.dialect.DeliverToIssue, t.Forge, t.Repo, t.Number, t.MergeRequest,
			ev.DeliveryID, ev.BodyHash, string(ev.Type), payload, ev.ReceivedAt, s.now())
		if err != nil {
			return insertRes{err: s.storeError("insert event", err)}
		}
		if n, _ := res.RowsAffected(); n == 1 {
			s.rememberMailbox(ctx, key)
			return insertRes{}
		}
		var stored bool
		if err := s.db.GetContext(ctx, &stored, sqlEventStored, ev.Forge, ev.DeliveryID, ev.BodyHash); err != nil {
			return insertRes{err: s.storeError("check duplicate", err)}
		}
		if stored {
			return insertRes{duplicate: true}
		}
	}
	return insertRes{err: fmt.Errorf("insert event: mailbox %s neither found nor created", t)}
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
		var err error
		if rows[i].Event, err = decodeEvent(rows[i].Payload); err != nil {
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

// sqlMarkProcessedIn marks a list of events processed: $1 the time, $2 the outcome, %s the
// placeholders of the ids ($3, $4, …).
const sqlMarkProcessedIn = `UPDATE events SET processed_at = $1, outcome = $2 WHERE id IN (%s)`

// markIDsPerStatement bounds the ids of one sqlMarkProcessedIn (SQLite's default limit is
// 32,766 parameters, PostgreSQL's 65,535).
const markIDsPerStatement = 500

// markProcessedIn marks the events of done processed with their outcomes at the instant now:
// one statement per outcome (and per markIDsPerStatement ids), whatever the number of events.
func (s *Store) markProcessedIn(ctx context.Context, q querier, done []mailbox.Processed, now time.Time) error {
	var outcomes []string
	ids := map[string][]int64{}
	for _, g := range done {
		if _, ok := ids[g.Outcome]; !ok {
			outcomes = append(outcomes, g.Outcome)
		}
		ids[g.Outcome] = append(ids[g.Outcome], g.IDs...)
	}
	for _, outcome := range outcomes {
		for chunk := range slices.Chunk(ids[outcome], markIDsPerStatement) {
			args := make([]any, 0, 2+len(chunk))
			args = append(args, now, outcome)
			var list strings.Builder
			for i, id := range chunk {
				if i > 0 {
					list.WriteString(", ")
				}
				fmt.Fprintf(&list, "$%d", i+3)
				args = append(args, id)
			}
			if _, err := q.ExecContext(ctx, fmt.Sprintf(sqlMarkProcessedIn, list.String()), args...); err != nil {
				return fmt.Errorf("mark %d events processed: %w", len(chunk), err)
			}
		}
	}
	return nil
}

// deliverToNewMailbox stores an event of a mailbox this process has not stored into yet, with
// portable statements: create the mailbox unless it exists, read its id, insert the event. The
// id is remembered only once the event is stored (inserted or a duplicate), so that the first
// event this process stores into a mailbox always waits for a pass (mailbox.ArrivalInbox).
func (s *Store) deliverToNewMailbox(ctx context.Context, key mailboxKey, ev forge.Event, payload string) insertRes {
	if _, err := s.db.ExecContext(ctx, sqlCreateMailbox, key.forge, key.repo, key.number, key.mergeRequest, s.now()); err != nil {
		return insertRes{err: s.storeError("create mailbox", err)}
	}
	var id int64
	if err := s.db.GetContext(ctx, &id, sqlMailboxID, key.forge, key.repo, key.number, key.mergeRequest); err != nil {
		return insertRes{err: s.storeError("find mailbox", err)}
	}
	res := s.batchInsert(ctx, id, ev, payload, false)
	if res.err == nil {
		s.ids.put(key, id)
	}
	return res
}
