package mailbox

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// ErrLeaseLost is returned by Extend when another worker holds the mailbox (our lease expired
// and was taken over).
var ErrLeaseLost = errors.New("mailbox: lease lost")

// Querier is what *sqlx.DB and *sqlx.Tx have in common.
type Querier interface {
	sqlx.ExtContext
	GetContext(ctx context.Context, dest any, query string, args ...any) error
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
}

// Store is the one place where Alfred's SQL lives. Portable SQL is here; the
// PostgreSQL-only statements (row locking with SKIP LOCKED, interval arithmetic) are in
// store_pg.go.
type Store struct {
	db *sqlx.DB
	// ids remembers mailbox ids by key for Deliver (mailboxIDs).
	ids *mailboxIDs
	// insertStmt is sqlInsertEvent prepared (insertEvent); insertErr why it could not be.
	insertOnce sync.Once
	insertStmt *sql.Stmt
	insertErr  error
}

// NewStore wraps a connection pool whose schema is migrated (migrations.Apply).
func NewStore(db *sqlx.DB) *Store { return &Store{db: db, ids: newMailboxIDs(maxCachedMailboxIDs)} }

// DB returns the underlying pool.
func (s *Store) DB() *sqlx.DB { return s.db }

// Ping reports whether the database answers; used by GET /readyz.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// WithTx runs fn in a transaction, committed when fn returns nil and rolled back otherwise.
func (s *Store) WithTx(ctx context.Context, fn func(q Querier) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// sqlDeliverToIssue stores an event in the mailbox of (forge, repo, number, merge_request),
// creating the mailbox when it does not exist, in one statement. The mailbox row is not locked
// when it exists. It inserts nothing when the delivery was stored before, and also when another
// delivery created the mailbox concurrently (its row is not visible to this statement's
// snapshot); Deliver tells the two apart.
const sqlDeliverToIssue = `
WITH existing AS (
	SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4
), created AS (
	INSERT INTO mailboxes (forge, repo, number, merge_request)
	SELECT $1, $2, $3, $4 WHERE NOT EXISTS (SELECT 1 FROM existing)
	ON CONFLICT (forge, repo, number, merge_request) DO NOTHING
	RETURNING id
)
INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at)
SELECT id, $1, $5, $6, $7, $8, $9 FROM (SELECT id FROM existing UNION ALL SELECT id FROM created) mb
ON CONFLICT DO NOTHING`

// sqlFindBotMailbox finds the issue mailbox whose merge request an event is about: by the
// merge request's number, else its source branch, else its head commit; 0 when none.
const sqlFindBotMailbox = `
SELECT coalesce(
	(SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND merge_request = FALSE
		AND $3::bigint <> 0 AND mr_number = $3 ORDER BY id LIMIT 1),
	(SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND merge_request = FALSE
		AND $4::text <> '' AND branch = $4 ORDER BY id DESC LIMIT 1),
	(SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND merge_request = FALSE
		AND $5::text <> '' AND head_sha = $5 ORDER BY id DESC LIMIT 1),
	0)`

const sqlMailboxID = `SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4`

const sqlInsertEvent = `
INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING`

const sqlEventStored = `SELECT EXISTS (SELECT 1 FROM events WHERE forge = $1 AND (delivery_id = $2 OR body_hash = $3))`

// Deliver stores an event in the inbox of the mailbox it belongs to and reports whether it
// was a duplicate (same forge and delivery id, or same body). Events on the bot's merge
// request (found by its number, its source branch or its head commit) go to the issue's
// mailbox; events on other merge requests to the merge request's own mailbox. A pipeline that
// matches no mailbox returns a *forge.IgnoreError. A value PostgreSQL refuses (invalid text, an
// identifier over an index's size) returns an error wrapping forge.ErrBadPayload. It
// implements webhook.Inbox.
//
// An event on an issue is one statement (two round trips); an event on a merge request or a
// pipeline adds the mailbox look-up.
func (s *Store) Deliver(ctx context.Context, ev forge.Event) (duplicate bool, err error) {
	if ev.BodyHash == "" {
		payload, _ := json.Marshal(ev)
		sum := sha256.Sum256(payload)
		ev.BodyHash = hex.EncodeToString(sum[:])
	}
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = time.Now()
	}
	payload, err := encodeEvent(ev)
	if err != nil {
		return false, fmt.Errorf("encode event: %w", err)
	}
	t := ev.Target
	if t.MergeRequest || ev.Type == forge.EventPipeline {
		id, err := s.findBotMailbox(ctx, ev)
		if err != nil {
			return false, storeError("find mailbox", err)
		}
		if id == 0 && t.Number == 0 {
			return false, forge.Ignore(ev.Header, "the pipeline belongs to no merge request or branch of Alfred's")
		}
		if id != 0 {
			res, err := s.insertEvent(ctx, id, ev, payload)
			if err != nil {
				return false, storeError("insert event", err)
			}
			n, _ := res.RowsAffected()
			return n == 0, nil
		}
	}
	// A mailbox this process has seen: one plain insert. A mailbox deleted since makes the
	// insert fail on the foreign key (23503); it is forgotten and looked up again.
	key := mailboxKey{forge: t.Forge, repo: t.Repo, number: t.Number, mergeRequest: t.MergeRequest}
	if id, ok := s.ids.get(key); ok {
		res, err := s.insertEvent(ctx, id, ev, payload)
		if err == nil {
			n, _ := res.RowsAffected()
			return n == 0, nil
		}
		if !isForeignKeyViolation(err) {
			return false, storeError("insert event", err)
		}
		s.ids.forget(key)
	}
	// Twice at most: a first attempt that raced another delivery creating the mailbox inserts
	// nothing, and the second sees the mailbox.
	for range 2 {
		res, err := s.db.ExecContext(ctx, sqlDeliverToIssue, t.Forge, t.Repo, t.Number, t.MergeRequest,
			ev.DeliveryID, ev.BodyHash, string(ev.Type), payload, ev.ReceivedAt)
		if err != nil {
			return false, storeError("insert event", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			s.rememberMailbox(ctx, key)
			return false, nil
		}
		var stored bool
		if err := s.db.GetContext(ctx, &stored, sqlEventStored, ev.Forge, ev.DeliveryID, ev.BodyHash); err != nil {
			return false, storeError("check duplicate", err)
		}
		if stored {
			return true, nil
		}
	}
	return false, fmt.Errorf("insert event: mailbox %s neither found nor created", t)
}

func (s *Store) findBotMailbox(ctx context.Context, ev forge.Event) (int64, error) {
	branch, sha := "", ""
	if ev.MergeRequest != nil {
		branch, sha = ev.MergeRequest.SourceBranch, ev.MergeRequest.HeadSHA
	}
	if ev.Pipeline != nil {
		branch, sha = firstNonEmpty(branch, ev.Pipeline.Ref), firstNonEmpty(sha, ev.Pipeline.SHA)
	}
	var id int64
	err := s.db.GetContext(ctx, &id, sqlFindBotMailbox, ev.Target.Forge, ev.Target.Repo, ev.Target.Number, branch, sha)
	return id, err
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

const mailboxColumns = `id, forge, repo, number, merge_request, state, issue_type, author, title,
labels, assignees, branch, mr_number, head_sha, data, wake_at, lease_owner, lease_expires_at,
closed_at, created_at, updated_at`

// Get reads a mailbox by id.
func (s *Store) Get(ctx context.Context, id int64) (*Mailbox, error) {
	var m Mailbox
	if err := s.db.GetContext(ctx, &m, `SELECT `+mailboxColumns+` FROM mailboxes WHERE id = $1`, id); err != nil {
		return nil, fmt.Errorf("get mailbox %d: %w", id, err)
	}
	return &m, nil
}

// Find reads the mailbox of an issue or merge request; sql.ErrNoRows (wrapped) when none.
func (s *Store) Find(ctx context.Context, ref forge.IssueRef) (*Mailbox, error) {
	var m Mailbox
	err := s.db.GetContext(ctx, &m, `SELECT `+mailboxColumns+` FROM mailboxes
		WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4`,
		ref.Forge, ref.Repo, ref.Number, ref.MergeRequest)
	if err != nil {
		return nil, fmt.Errorf("find mailbox %s: %w", ref, err)
	}
	return &m, nil
}

const sqlSaveMailbox = `
UPDATE mailboxes SET state = $2, issue_type = $3, author = $4, title = $5, labels = $6,
	assignees = $7, branch = $8, mr_number = $9, head_sha = $10, data = $11, wake_at = $12,
	closed_at = $13, updated_at = now()
WHERE id = $1`

// Save writes the mutable fields of m (not the lease).
func (s *Store) Save(ctx context.Context, q Querier, m *Mailbox) error {
	if q == nil {
		q = s.db
	}
	_, err := q.ExecContext(ctx, sqlSaveMailbox, m.ID, m.State, m.Type, m.Author, m.Title, m.Labels,
		m.Assignees, m.Branch, m.MRNumber, m.HeadSHA, m.Data, m.WakeAt, m.ClosedAt)
	if err != nil {
		return fmt.Errorf("save mailbox %d: %w", m.ID, err)
	}
	return nil
}

// SaveData writes only the mailbox's data document (used outside a step, without the lease).
func (s *Store) SaveData(ctx context.Context, m *Mailbox) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE mailboxes SET data = $2 WHERE id = $1`, m.ID, m.Data); err != nil {
		return fmt.Errorf("save mailbox data %d: %w", m.ID, err)
	}
	return nil
}

// PendingEvents returns the unprocessed events of a mailbox in arrival order.
func (s *Store) PendingEvents(ctx context.Context, mailboxID int64) ([]StoredEvent, error) {
	var rows []StoredEvent
	err := s.db.SelectContext(ctx, &rows, `SELECT id, mailbox_id, payload, received_at FROM events
		WHERE mailbox_id = $1 AND processed_at IS NULL ORDER BY id`, mailboxID)
	if err != nil {
		return nil, fmt.Errorf("list pending events: %w", err)
	}
	for i := range rows {
		if rows[i].Event, err = decodeEvent(rows[i].Payload); err != nil {
			return nil, fmt.Errorf("decode event %d: %w", rows[i].ID, err)
		}
	}
	return rows, nil
}

// MarkProcessed marks events as handled, with a short outcome for debugging.
func (s *Store) MarkProcessed(ctx context.Context, q Querier, id int64, outcome string) error {
	if q == nil {
		q = s.db
	}
	_, err := q.ExecContext(ctx, `UPDATE events SET processed_at = now(), outcome = $2 WHERE id = $1`, id, outcome)
	if err != nil {
		return fmt.Errorf("mark event %d processed: %w", id, err)
	}
	return nil
}

// InsertQuestions stores a question block; re-inserting the same (mailbox, round, qid) is a
// no-op, so a retried round does not duplicate questions.
func (s *Store) InsertQuestions(ctx context.Context, q Querier, qs []Question) error {
	if q == nil {
		q = s.db
	}
	for _, x := range qs {
		_, err := q.ExecContext(ctx, `INSERT INTO questions
			(mailbox_id, round, qid, title, context, options, default_option, deadline_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
			x.MailboxID, x.Round, x.QID, x.Title, x.Context, x.OptionsJSON, x.Default, x.DeadlineAt)
		if err != nil {
			return fmt.Errorf("insert question %s: %w", x.QID, err)
		}
	}
	return nil
}

// Questions returns the questions of one round, in qid order.
func (s *Store) Questions(ctx context.Context, mailboxID int64, round int) ([]Question, error) {
	var qs []Question
	err := s.db.SelectContext(ctx, &qs, `SELECT id, mailbox_id, round, qid, title, context, options,
		default_option, deadline_at, answer, answered_by, answered_at
		FROM questions WHERE mailbox_id = $1 AND round = $2 ORDER BY id`, mailboxID, round)
	if err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	return qs, nil
}

// AnswerQuestion records the answer (an option id) and who gave it ("default" when the
// deadline applied it).
func (s *Store) AnswerQuestion(ctx context.Context, q Querier, id int64, answer, by string, at time.Time) error {
	if q == nil {
		q = s.db
	}
	_, err := q.ExecContext(ctx, `UPDATE questions SET answer = $2, answered_by = $3, answered_at = $4
		WHERE id = $1`, id, answer, by, at)
	if err != nil {
		return fmt.Errorf("answer question %d: %w", id, err)
	}
	return nil
}

// StartRun inserts a run row in status running and sets r.ID and r.Attempt (1 + the number of
// earlier runs of the same phase and step in the mailbox).
func (s *Store) StartRun(ctx context.Context, r *Run) error {
	err := s.db.GetContext(ctx, &r.Attempt, `SELECT count(*) + 1 FROM runs
		WHERE mailbox_id = $1 AND phase = $2 AND step = $3`, r.MailboxID, r.Phase, r.Step)
	if err != nil {
		return fmt.Errorf("count runs: %w", err)
	}
	err = s.db.GetContext(ctx, r, `INSERT INTO runs (mailbox_id, phase, step, attempt, status, container)
		VALUES ($1, $2, $3, $4, 'running', $5)
		RETURNING id, mailbox_id, phase, step, attempt, status, container, started_at`,
		r.MailboxID, r.Phase, r.Step, r.Attempt, r.Container)
	if err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	return nil
}

// FinishRun records the end of a run.
func (s *Store) FinishRun(ctx context.Context, r *Run) error {
	_, err := s.db.ExecContext(ctx, `UPDATE runs SET status = $2, container = $3, finished_at = now(),
		exit_code = $4, outcome = $5, output = $6, result = $7 WHERE id = $1`,
		r.ID, r.Status, r.Container, r.ExitCode, r.Outcome, r.Output, r.Result)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", r.ID, err)
	}
	return nil
}

// Runs lists a mailbox's runs, oldest first.
func (s *Store) Runs(ctx context.Context, mailboxID int64) ([]Run, error) {
	var rs []Run
	err := s.db.SelectContext(ctx, &rs, `SELECT `+runColumns+` FROM runs
		WHERE mailbox_id = $1 ORDER BY id`, mailboxID)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return rs, nil
}

// InterruptRuns marks the mailbox's runs still "running" as interrupted (their worker died)
// and returns them.
func (s *Store) InterruptRuns(ctx context.Context, mailboxID int64) ([]Run, error) {
	var rs []Run
	err := s.db.SelectContext(ctx, &rs, `UPDATE runs SET status = 'interrupted', finished_at = now(),
		outcome = 'interrupted: the worker running it stopped'
		WHERE mailbox_id = $1 AND status = 'running'
		RETURNING id, mailbox_id, phase, step, attempt, status, container, started_at`, mailboxID)
	if err != nil {
		return nil, fmt.Errorf("interrupt runs: %w", err)
	}
	return rs, nil
}

// PostedComment is one row of comments.
type PostedComment struct {
	MailboxID int64  `db:"mailbox_id"`
	Key       string `db:"key"`
	Kind      string `db:"kind"`
	CommentID int64  `db:"comment_id"`
	BodyHash  string `db:"body_hash"`
}

// PostedComment returns the comment recorded under key, or nil.
func (s *Store) PostedComment(ctx context.Context, mailboxID int64, key string) (*PostedComment, error) {
	var c PostedComment
	err := s.db.GetContext(ctx, &c, `SELECT mailbox_id, key, kind, comment_id, body_hash FROM comments
		WHERE mailbox_id = $1 AND key = $2`, mailboxID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get posted comment: %w", err)
	}
	return &c, nil
}

// RecordComment stores or updates the comment posted under key.
func (s *Store) RecordComment(ctx context.Context, c PostedComment) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO comments (mailbox_id, key, kind, comment_id, body_hash)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (mailbox_id, key) DO UPDATE SET comment_id = EXCLUDED.comment_id,
			body_hash = EXCLUDED.body_hash, kind = EXCLUDED.kind`,
		c.MailboxID, c.Key, c.Kind, c.CommentID, c.BodyHash)
	if err != nil {
		return fmt.Errorf("record comment: %w", err)
	}
	return nil
}

// OpenMailboxes returns the ids of mailboxes that are not closed.
func (s *Store) OpenMailboxes(ctx context.Context) (map[int64]bool, error) {
	var ids []int64
	if err := s.db.SelectContext(ctx, &ids, `SELECT id FROM mailboxes WHERE closed_at IS NULL`); err != nil {
		return nil, fmt.Errorf("list open mailboxes: %w", err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// LeasedMailboxes returns the ids of mailboxes whose lease is live (held and unexpired).
func (s *Store) LeasedMailboxes(ctx context.Context) (map[int64]bool, error) {
	var ids []int64
	err := s.db.SelectContext(ctx, &ids, `SELECT id FROM mailboxes
		WHERE lease_owner IS NOT NULL AND lease_expires_at > now()`)
	if err != nil {
		return nil, fmt.Errorf("list leased mailboxes: %w", err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
