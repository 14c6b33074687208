package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ mailbox.ShadowLog = (*Store)(nil)

// sqlRecordShadow appends a shadow write, attached to the mailbox of its target when there is
// one (none for a repository's write, number 0). A write on the bot's own merge request (the
// held auto-merge) has no mailbox of its own: it is attached to the issue's mailbox whose merge
// request it is, so that the issue's page shows it and retention purges it with the issue.
const sqlRecordShadow = `
INSERT INTO shadow_writes (mailbox_id, forge, repo, number, merge_request, kind, comment_id, body,
	add_labels, remove_labels, detail, at)
VALUES (COALESCE(
		(SELECT id FROM mailboxes WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4),
		(SELECT id FROM mailboxes WHERE $4 AND forge = $1 AND repo = $2 AND mr_number = $3
			AND NOT merge_request ORDER BY id DESC LIMIT 1)),
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING id`

// RecordShadow implements mailbox.ShadowLog: an edit replaces the earlier edit of its comment,
// in the same transaction.
func (s *Store) RecordShadow(ctx context.Context, w mailbox.ShadowWrite) (int64, error) {
	add, remove, detail, err := encodeShadow(w)
	if err != nil {
		return 0, err
	}
	at := w.At
	if at.IsZero() {
		at = s.now()
	}
	var id int64
	err = s.withTx(ctx, func(q querier) error {
		if w.Kind == mailbox.ShadowEditComment {
			if _, err := q.ExecContext(ctx, sqlDropEarlierEdits, w.Target.Forge, w.Target.Repo, w.Target.Number,
				w.Target.MergeRequest, w.CommentID); err != nil {
				return err
			}
		}
		return q.GetContext(ctx, &id, sqlRecordShadow, w.Target.Forge, w.Target.Repo, w.Target.Number,
			w.Target.MergeRequest, string(w.Kind), w.CommentID, w.Body, add, remove, detail, at)
	})
	if err != nil {
		return 0, fmt.Errorf("record shadow write: %w", err)
	}
	return id, nil
}

// sqlDropEarlierEdits deletes the earlier edits of a comment on a target: the log keeps the
// latest edit of each comment only (mailbox.ShadowLog), so its size follows the work done, not
// the passes made while a run is held. Migration 0015 compacted the rows written before.
const sqlDropEarlierEdits = `
DELETE FROM shadow_writes
WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4 AND kind = 'edit_comment' AND comment_id = $5`

func encodeShadow(w mailbox.ShadowWrite) (add, remove, detail string, err error) {
	enc := func(v any, empty string) string {
		if err != nil {
			return ""
		}
		var b []byte
		b, err = json.Marshal(v)
		if string(b) == "null" {
			return empty
		}
		return string(b)
	}
	add, remove, detail = enc(w.Add, "[]"), enc(w.Remove, "[]"), enc(w.Detail, "{}")
	if err != nil {
		return "", "", "", fmt.Errorf("encode shadow write: %w", err)
	}
	return add, remove, detail, nil
}

// shadowRow is one row of shadow_writes.
type shadowRow struct {
	ID           int64     `db:"id"`
	Forge        string    `db:"forge"`
	Repo         string    `db:"repo"`
	Number       int64     `db:"number"`
	MergeRequest bool      `db:"merge_request"`
	Kind         string    `db:"kind"`
	CommentID    int64     `db:"comment_id"`
	Body         string    `db:"body"`
	AddLabels    string    `db:"add_labels"`
	RemoveLabels string    `db:"remove_labels"`
	Detail       string    `db:"detail"`
	At           time.Time `db:"at"`
}

func (r shadowRow) write() (mailbox.ShadowWrite, error) {
	w := mailbox.ShadowWrite{ID: r.ID, Target: forge.IssueRef{Forge: r.Forge, Repo: r.Repo, Number: r.Number,
		MergeRequest: r.MergeRequest}, Kind: mailbox.ShadowKind(r.Kind), CommentID: r.CommentID, Body: r.Body, At: r.At.UTC()}
	for _, f := range []struct {
		raw string
		v   any
	}{{r.AddLabels, &w.Add}, {r.RemoveLabels, &w.Remove}, {cmp.Or(r.Detail, "{}"), &w.Detail}} {
		if err := json.Unmarshal([]byte(cmp.Or(f.raw, "null")), f.v); err != nil {
			return w, fmt.Errorf("decode shadow write %d: %w", r.ID, err)
		}
	}
	if len(w.Detail) == 0 {
		w.Detail = nil
	}
	return w, nil
}

const sqlShadowColumns = `id, forge, repo, number, merge_request, kind, comment_id, body, add_labels, remove_labels, detail, at`

const sqlShadowWrites = `SELECT ` + sqlShadowColumns + ` FROM shadow_writes
WHERE forge = $1 AND repo = $2 AND number = $3 AND merge_request = $4 ORDER BY id`

// ShadowWrites implements mailbox.ShadowLog.
func (s *Store) ShadowWrites(ctx context.Context, target forge.IssueRef) ([]mailbox.ShadowWrite, error) {
	var rows []shadowRow
	if err := s.db.SelectContext(ctx, &rows, sqlShadowWrites, target.Forge, target.Repo, target.Number, target.MergeRequest); err != nil {
		return nil, fmt.Errorf("list shadow writes of %s: %w", target, err)
	}
	return decodeShadow(rows)
}

func decodeShadow(rows []shadowRow) ([]mailbox.ShadowWrite, error) {
	out := make([]mailbox.ShadowWrite, 0, len(rows))
	for _, r := range rows {
		w, err := r.write()
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

const sqlWebShadow = `SELECT ` + sqlShadowColumns + ` FROM shadow_writes WHERE mailbox_id = $1 ORDER BY id DESC LIMIT $2`

// webShadow reads the latest web.MaxTimelineEvents shadow writes of mailbox id for its page,
// oldest first, and whether older ones were left out.
func (s *Store) webShadow(ctx context.Context, id int64) ([]web.ShadowPost, bool, error) {
	var rows []shadowRow
	if err := s.db.SelectContext(ctx, &rows, sqlWebShadow, id, web.MaxTimelineEvents+1); err != nil {
		return nil, false, fmt.Errorf("list shadow writes of mailbox %d: %w", id, err)
	}
	cut := len(rows) > web.MaxTimelineEvents
	if cut {
		rows = rows[:web.MaxTimelineEvents]
	}
	slices.Reverse(rows) // read newest first, shown oldest first
	ws, err := decodeShadow(rows)
	if err != nil {
		return nil, false, err
	}
	out := make([]web.ShadowPost, 0, len(ws))
	for _, w := range ws {
		commentID := w.CommentID
		if w.Kind == mailbox.ShadowComment {
			// A created comment's synthetic id is not stored: it is minus the row's id (what
			// mailbox.Shadow answered and what a later edit names).
			commentID = -w.ID
		}
		out = append(out, web.ShadowPost{ID: w.ID, At: w.At, Kind: string(w.Kind), CommentID: commentID, Body: w.Body,
			Add: w.Add, Remove: w.Remove, Detail: w.Detail})
	}
	return out, cut, nil
}
