package sqlstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

const sqlApplyComment = `
INSERT INTO applied_comments (mailbox_id, comment_id, event_id, applied_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (mailbox_id, comment_id) DO UPDATE SET event_id = applied_comments.event_id
RETURNING event_id`

// ApplyComment implements mailbox.Reconciliation: the primary key (mailbox_id, comment_id)
// keeps the first claim, which the statement returns.
func (s *Store) ApplyComment(ctx context.Context, mailboxID, commentID, eventID int64) (bool, error) {
	var owner int64
	if err := s.db.GetContext(ctx, &owner, sqlApplyComment, mailboxID, commentID, eventID, s.now()); err != nil {
		return false, fmt.Errorf("claim comment %d: %w", commentID, err)
	}
	return owner == eventID, nil
}

// workingStates is the SQL condition of a working mailbox (mailbox.State.Working).
const workingStates = `state NOT IN ('idle', 'done', 'cancelled') AND merge_request = FALSE AND closed_at IS NULL`

// sqlReconcileDue reads the open mailboxes of the forge through an index of open mailboxes
// (mailboxes_open or mailboxes_reconcile, as the engine chooses), never the closed ones: $1
// forge, $2 limit.
const sqlReconcileDue = `SELECT ` + mailboxColumns + ` FROM mailboxes
WHERE forge = $1 AND ` + workingStates + `
ORDER BY reconciled_at NULLS FIRST, id LIMIT $2`

// ReconcileDue implements mailbox.Reconciliation.
func (s *Store) ReconcileDue(ctx context.Context, forgeName string, limit int) ([]mailbox.Mailbox, error) {
	var out []mailbox.Mailbox
	if err := s.selectPrepared(ctx, &out, sqlReconcileDue, forgeName, limit); err != nil {
		return nil, fmt.Errorf("list mailboxes to reconcile: %w", err)
	}
	return out, nil
}

const sqlSaveReconciled = `UPDATE mailboxes SET reconciled_at = $2, issue_updated_at = $3,
mr_updated_at = $4, comments_since = $5 WHERE id = $1`

// SaveReconciled implements mailbox.Reconciliation.
func (s *Store) SaveReconciled(ctx context.Context, id int64, r mailbox.Reconciled) error {
	_, err := s.db.ExecContext(ctx, sqlSaveReconciled, id, s.now(), r.IssueUpdatedAt, r.MRUpdatedAt, r.CommentsSince)
	if err != nil {
		return fmt.Errorf("save reconciliation of mailbox %d: %w", id, err)
	}
	return nil
}

// sqlTracked reads the issue's mailbox by its unique key.
const sqlTracked = `SELECT count(*) FROM mailboxes
WHERE forge = $1 AND repo = $2 AND number = $3 AND ` + workingStates

// Tracked implements mailbox.Reconciliation.
func (s *Store) Tracked(ctx context.Context, ref forge.IssueRef) (bool, error) {
	var n int
	if err := s.getPrepared(ctx, &n, sqlTracked, ref.Forge, ref.Repo, ref.Number); err != nil {
		return false, fmt.Errorf("find mailbox of %s: %w", ref, err)
	}
	return n > 0, nil
}

// sqlKnownRepos lists the forge's repositories ($1) in order by skipping through the unique
// index (forge, repo, number, merge_request): each step reads the first entry of the next
// repository, so the statement costs one index probe per repository, not one row per mailbox.
const sqlKnownRepos = `
WITH RECURSIVE known (repo) AS (
	SELECT (SELECT repo FROM mailboxes WHERE forge = $1 ORDER BY repo LIMIT 1)
	UNION ALL
	SELECT (SELECT m.repo FROM mailboxes m WHERE m.forge = $1 AND m.repo > known.repo ORDER BY m.repo LIMIT 1)
	FROM known WHERE known.repo IS NOT NULL
)
SELECT repo FROM known WHERE repo IS NOT NULL`

// KnownRepos implements mailbox.Reconciliation. The statement walks the database's collation
// (a language's, such as en_US.UTF-8, sorts "Zeta" among the z's); the list is sorted again in
// byte order, the order its callers search it in.
func (s *Store) KnownRepos(ctx context.Context, forgeName string) ([]string, error) {
	var out []string
	if err := s.selectPrepared(ctx, &out, sqlKnownRepos, forgeName); err != nil {
		return nil, fmt.Errorf("list known repositories: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// sqlFailEvents counts a failed attempt; $2 max, $3 error, $4 now. An event reaching max is
// set aside: processed, with failed_at and the error.
const sqlFailEvents = `
UPDATE events SET attempts = attempts + 1,
	failed_at    = CASE WHEN attempts + 1 >= $2 THEN CAST($4 AS TIMESTAMPTZ) END,
	processed_at = CASE WHEN attempts + 1 >= $2 THEN CAST($4 AS TIMESTAMPTZ) END,
	outcome      = CASE WHEN attempts + 1 >= $2 THEN 'set aside: could not be applied' ELSE outcome END,
	error        = $3
WHERE id = $1 AND processed_at IS NULL
RETURNING failed_at IS NOT NULL`

// FailEvents implements mailbox.Reconciliation, one event at a time in one transaction.
func (s *Store) FailEvents(ctx context.Context, eventIDs []int64, errText string, max int) (int, error) {
	n := 0
	now := s.now()
	err := s.withTx(ctx, func(q querier) error {
		for _, id := range eventIDs {
			var aside []bool
			if err := q.SelectContext(ctx, &aside, sqlFailEvents, id, max, errText, now); err != nil {
				return fmt.Errorf("count failed event %d: %w", id, err)
			}
			if len(aside) == 1 && aside[0] {
				n++
			}
		}
		return nil
	})
	return n, err
}
