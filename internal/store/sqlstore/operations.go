package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/internal/metrics"
	"github.com/alfred-bot/alfred/mailbox"
)

// Gauges implements what internal/metrics reads at scrape time.
func (s *Store) Gauges(ctx context.Context) (metrics.Gauges, error) {
	g := metrics.Gauges{MailboxesByState: map[string]int{}}
	var states []struct {
		State string `db:"state"`
		N     int    `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &states, `SELECT state, count(*) AS n FROM mailboxes GROUP BY state`); err != nil {
		return g, fmt.Errorf("count mailboxes: %w", err)
	}
	for _, st := range states {
		g.MailboxesByState[st.State] = st.N
	}
	const queued = `SELECT count(*) FROM mailboxes m
WHERE (m.lease_owner IS NULL OR m.lease_expires_at <= $1)
AND (EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL)
	OR (m.wake_at IS NOT NULL AND m.wake_at <= $1))`
	if err := s.db.GetContext(ctx, &g.RunsQueued, queued, s.now()); err != nil {
		return g, fmt.Errorf("count queued mailboxes: %w", err)
	}
	if err := s.db.GetContext(ctx, &g.RunsRunning, `SELECT count(*) FROM runs WHERE status = 'running'`); err != nil {
		return g, fmt.Errorf("count running runs: %w", err)
	}
	var err error
	if g.EventsUnprocessed, g.OldestUnprocessed, err = s.Backlog(ctx); err != nil {
		return g, err
	}
	return g, nil
}

// sqlBacklog counts the unprocessed events (through the partial index events_pending).
const sqlBacklog = `SELECT count(*) FROM events WHERE processed_at IS NULL`

// sqlOldestPending reads the receive time of the first unprocessed event in arrival order;
// the column itself, not an aggregate, so that each engine's driver reads it as a time.
//
// ORDER BY +id: ordered by the key itself, SQLite walks every event from the first, processed
// or not, until it meets a pending one; so the pending events are read through their index
// and sorted (as many as wait).
const sqlOldestPending = `SELECT received_at FROM events WHERE processed_at IS NULL ORDER BY +id LIMIT 1`

// Backlog returns how many events wait to be applied and how long the first of them (in
// arrival order) has waited since it was received, at the store's clock (0 when none waits).
func (s *Store) Backlog(ctx context.Context) (int, time.Duration, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, sqlBacklog); err != nil {
		return 0, 0, fmt.Errorf("count unprocessed events: %w", err)
	}
	var oldest time.Time
	err := s.db.GetContext(ctx, &oldest, sqlOldestPending)
	if errors.Is(err, sql.ErrNoRows) {
		return n, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read the oldest unprocessed event: %w", err)
	}
	return n, max(s.now().Sub(oldest), 0), nil
}

const sqlUsage = `SELECT r.phase, r.started_at, r.finished_at, coalesce(s.tokens_in, 0) AS tokens_in,
	coalesce(s.tokens_out, 0) AS tokens_out, coalesce(s.cost_usd, 0) AS cost_usd,
	(coalesce(s.reported_cost, 0) > 0 OR (s.id IS NULL AND r.container = '')) AS rated
FROM runs r LEFT JOIN llm_sessions s ON s.run_id = r.id
WHERE r.mailbox_id = $1 AND r.finished_at IS NOT NULL ORDER BY r.id, s.id`

// Usage implements mailbox.UsageReader: the finished runs of a mailbox with their tokens and
// cost, oldest first. A run that ran an agent without a session record counts no tokens and
// is unrated; one that ran no agent (no container) is rated at no cost (as the pages count
// them, sqlRunUnrated).
func (s *Store) Usage(ctx context.Context, mailboxID int64) ([]mailbox.ProgressRun, error) {
	var rows []struct {
		Phase      string    `db:"phase"`
		StartedAt  time.Time `db:"started_at"`
		FinishedAt time.Time `db:"finished_at"`
		TokensIn   int64     `db:"tokens_in"`
		TokensOut  int64     `db:"tokens_out"`
		CostUSD    float64   `db:"cost_usd"`
		Rated      bool      `db:"rated"`
	}
	if err := s.db.SelectContext(ctx, &rows, sqlUsage, mailboxID); err != nil {
		return nil, fmt.Errorf("read usage of mailbox %d: %w", mailboxID, err)
	}
	out := make([]mailbox.ProgressRun, 0, len(rows))
	for _, r := range rows {
		out = append(out, mailbox.ProgressRun{Phase: r.Phase, Duration: r.FinishedAt.Sub(r.StartedAt),
			TokensIn: r.TokensIn, TokensOut: r.TokensOut, CostUSD: r.CostUSD, Rated: r.Rated})
	}
	return out, nil
}

// OpenRepositories lists, by forge name, the repositories with an open mailbox.
func (s *Store) OpenRepositories(ctx context.Context) (map[string][]string, error) {
	var rows []struct {
		Forge string `db:"forge"`
		Repo  string `db:"repo"`
	}
	const q = `SELECT DISTINCT forge, repo FROM mailboxes WHERE closed_at IS NULL ORDER BY forge, repo`
	if err := s.db.SelectContext(ctx, &rows, q); err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.Forge] = append(out[r.Forge], r.Repo)
	}
	return out, nil
}

// sqlPurgeable lists the closed mailboxes not purged since they last changed (purged_at
// before updated_at, or never purged) that closed before $1, oldest first. It reads the index
// mailboxes_purgeable, which holds those mailboxes only: a mailbox purged before, however
// old, is not read again.
const sqlPurgeable = `SELECT m.id, m.forge, m.repo, m.closed_at FROM mailboxes m
WHERE m.closed_at IS NOT NULL AND (m.purged_at IS NULL OR m.purged_at < m.updated_at) AND m.closed_at < $1
ORDER BY m.closed_at`

// Purgeable implements mailbox.RetentionStore: a closed mailbox is purgeable until Purge has
// purged it, and again once it changed since (saved: an event processed, reopened and closed).
func (s *Store) Purgeable(ctx context.Context, before time.Time) ([]mailbox.ClosedMailbox, error) {
	var out []mailbox.ClosedMailbox
	if err := s.selectPrepared(ctx, &out, sqlPurgeable, before); err != nil {
		return nil, fmt.Errorf("list purgeable mailboxes: %w", err)
	}
	return out, nil
}

// Purge implements mailbox.RetentionStore: it deletes the mailbox's applied events (the received
// payloads; an event not applied yet, which may start the issue again, is kept) and its shadow writes (the texts shadow mode did not post), blanks the runs' logs and outputs and the questions' context and records when
// (purged_at, which takes the mailbox out of Purgeable), in one transaction. Idempotent.
func (s *Store) Purge(ctx context.Context, mailboxID int64) error {
	return s.withTx(ctx, func(q querier) error {
		var closed bool
		if err := q.GetContext(ctx, &closed, `SELECT closed_at IS NOT NULL FROM mailboxes WHERE id = $1`, mailboxID); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return fmt.Errorf("read mailbox %d: %w", mailboxID, err)
		}
		if !closed {
			return nil
		}
		for _, st := range []string{
			`DELETE FROM events WHERE mailbox_id = $1 AND processed_at IS NOT NULL`, // a pending one reopens it
			`UPDATE runs SET output = '', result = '' WHERE mailbox_id = $1 AND (output <> '' OR result <> '')`,
			`UPDATE questions SET context = '' WHERE mailbox_id = $1 AND context <> ''`,
			`DELETE FROM shadow_writes WHERE mailbox_id = $1`,
		} {
			if _, err := q.ExecContext(ctx, st, mailboxID); err != nil {
				return fmt.Errorf("purge mailbox %d: %w", mailboxID, err)
			}
		}
		if _, err := q.ExecContext(ctx, `UPDATE mailboxes SET purged_at = $2 WHERE id = $1`, mailboxID, s.now()); err != nil {
			return fmt.Errorf("record the purge of mailbox %d: %w", mailboxID, err)
		}
		return nil
	})
}
