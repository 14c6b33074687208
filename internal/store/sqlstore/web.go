package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ web.Reader = (*Store)(nil)

// The cost of runs. A run is rated when its llm_sessions record says its adapter reported a
// cost. A finished run that ran an agent (a container, or a session record) is unrated
// otherwise: its adapter reported no cost, or it has no session record (sessions off, a merge
// request not the bot's, an adapter without sessions). A run that ran no agent costs nothing.
const (
	sqlRated   = `reported_cost > 0`
	sqlSumCost = `coalesce(sum(CASE WHEN ` + sqlRated + ` THEN cost_usd ELSE 0 END), 0)`
	// sqlRunUnrated is true for run r when it is unrated.
	sqlRunUnrated = `r.finished_at IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM llm_sessions s WHERE s.mailbox_id = r.mailbox_id AND s.run_id = r.id AND s.` + sqlRated + `)
	AND (r.container <> '' OR EXISTS (SELECT 1 FROM llm_sessions s WHERE s.mailbox_id = r.mailbox_id AND s.run_id = r.id))`
)

const sqlWebMailboxes = `
SELECT m.id, m.forge, m.repo, m.number, m.merge_request, m.title, m.state, m.branch, m.mr_number,
	m.closed_at IS NOT NULL AS closed,
	(m.lease_owner IS NOT NULL AND m.lease_expires_at > $1) AS leased,
	(EXISTS (SELECT 1 FROM events e WHERE e.mailbox_id = m.id AND e.processed_at IS NULL)
		OR (m.wake_at IS NOT NULL AND m.wake_at <= $1)) AS due,
	coalesce(rr.phase, '') AS running_phase,
	coalesce(le.event_type, '') AS last_event, le.received_at AS last_event_at,
	(SELECT ` + sqlSumCost + ` FROM llm_sessions s WHERE s.mailbox_id = m.id) AS cost_usd,
	(SELECT count(*) FROM runs r WHERE r.mailbox_id = m.id AND ` + sqlRunUnrated + `) AS unrated,
	(SELECT coalesce(sum(tokens_in), 0) FROM llm_sessions s WHERE s.mailbox_id = m.id) AS tokens_in,
	(SELECT coalesce(sum(tokens_out), 0) FROM llm_sessions s WHERE s.mailbox_id = m.id) AS tokens_out,
	m.paused_at IS NOT NULL AS paused, m.paused_by,
	EXISTS (SELECT 1 FROM paused_projects p WHERE p.forge = m.forge AND p.repo = m.repo) AS project_paused,
	(SELECT count(*) FROM shadow_writes w WHERE w.mailbox_id = m.id) AS shadow_writes
FROM mailboxes m
LEFT JOIN runs rr ON rr.id = (SELECT max(x.id) FROM runs x WHERE x.mailbox_id = m.id AND x.status = 'running')
LEFT JOIN events le ON le.id = (SELECT max(x.id) FROM events x WHERE x.mailbox_id = m.id)`

type webMailboxRow struct {
	ID           int64        `db:"id"`
	Forge        string       `db:"forge"`
	Repo         string       `db:"repo"`
	Number       int64        `db:"number"`
	MergeRequest bool         `db:"merge_request"`
	Title        string       `db:"title"`
	State        string       `db:"state"`
	Branch       string       `db:"branch"`
	MRNumber     int64        `db:"mr_number"`
	Closed       bool         `db:"closed"`
	Leased       bool         `db:"leased"`
	Due          bool         `db:"due"`
	RunningPhase string       `db:"running_phase"`
	LastEvent    string       `db:"last_event"`
	LastEventAt  sql.NullTime `db:"last_event_at"`
	CostUSD      float64      `db:"cost_usd"`
	Unrated      int          `db:"unrated"`
	TokensIn     int64        `db:"tokens_in"`
	TokensOut    int64        `db:"tokens_out"`
	Paused       bool         `db:"paused"`
	PausedBy     string       `db:"paused_by"`
	ProjPaused   bool         `db:"project_paused"`
	ShadowWrites int          `db:"shadow_writes"`
}

func (r webMailboxRow) summary() web.MailboxSummary {
	s := web.MailboxSummary{ID: r.ID, Forge: r.Forge, Repo: r.Repo, Number: r.Number, MergeRequest: r.MergeRequest,
		Title: r.Title, State: r.State, Phase: r.RunningPhase, Running: r.RunningPhase != "",
		LastEvent: r.LastEvent, LastEventAt: r.LastEventAt.Time, CostUSD: r.CostUSD, Unrated: r.Unrated,
		TokensIn: r.TokensIn, TokensOut: r.TokensOut, Closed: r.Closed,
		Paused: r.Paused, PausedBy: r.PausedBy, ProjectPaused: r.ProjPaused, ShadowWrites: r.ShadowWrites}
	if !s.Running && !r.Closed {
		if p := mailbox.State(r.State).Phase(); p != "" && r.Due {
			s.Phase, s.Queued = string(p), true
		} else if r.Due && !r.Leased {
			s.Queued = true
		}
	}
	return s
}

// sqlWebMailboxPage picks the ids of one page first, from mailboxes alone, so that the joins
// and sums of the list are computed for the page's rows only, not for every skipped one.
const sqlWebMailboxPage = ` WHERE m.id IN (SELECT id FROM mailboxes ORDER BY updated_at DESC, id DESC LIMIT $2 OFFSET $3)
ORDER BY m.updated_at DESC, m.id DESC`

// Mailboxes implements web.Reader: one page, newest activity first (the last change of the
// mailbox row, then the newest id). Times are read from their own columns (joined rows, not
// aggregates), so that SQLite returns them as times.
func (s *Store) Mailboxes(ctx context.Context, offset, limit int) ([]web.MailboxSummary, error) {
	var rows []webMailboxRow
	if err := s.db.SelectContext(ctx, &rows, sqlWebMailboxes+sqlWebMailboxPage, s.now(), limit, offset); err != nil {
		return nil, fmt.Errorf("list mailboxes: %w", err)
	}
	out := make([]web.MailboxSummary, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.summary())
	}
	return out, nil
}

// sqlWebActions reads what operators did to a mailbox ($1) and to its project ($2 forge, $3
// repo), from the indexes operator_actions_mailbox and operator_actions_project.
const sqlWebActions = `SELECT action, actor, at FROM (
SELECT id, action, actor, at FROM operator_actions WHERE mailbox_id = $1
UNION ALL SELECT id, action, actor, at FROM operator_actions WHERE mailbox_id IS NULL AND forge = $2 AND repo = $3) a
ORDER BY id DESC LIMIT $4`

// sqlWebEvents reads the latest $2 events of a mailbox ($1), newest first.
const sqlWebEvents = `SELECT event_type, payload, received_at, processed_at, outcome FROM events
WHERE mailbox_id = $1 ORDER BY id DESC LIMIT $2`

// sqlWebStateChanges reads a mailbox's state changes (migrations/0018_state_changes.sql, a
// trigger records them) through state_changes_mailbox.
const sqlWebStateChanges = `SELECT at, from_state, to_state FROM state_changes WHERE mailbox_id = $1 ORDER BY id DESC LIMIT $2`

const sqlWebRunColumns = `r.id, r.mailbox_id, r.phase, r.step, r.attempt, r.status, r.outcome, r.started_at,
	r.finished_at,
	coalesce(nullif(r.container, ''), (SELECT e.container_name FROM executors e WHERE e.run_id = r.id
		ORDER BY e.id DESC LIMIT 1), '') AS container,
	s.adapter AS "s.adapter", s.model AS "s.model", s.session_name AS "s.session_name", s.native_id AS "s.native_id",
	s.resumed AS "s.resumed", s.fallback_reason AS "s.fallback_reason", s.tokens_in AS "s.tokens_in",
	s.tokens_out AS "s.tokens_out", s.cost_usd AS "s.cost_usd", s.reported_cost AS "s.reported_cost"`

// sqlWebRunFrom joins each run with its latest session record. A running run's container is
// the one its executor record names (runs.container is written when the run ends).
const sqlWebRunFrom = ` FROM runs r
LEFT JOIN llm_sessions s ON s.id = (SELECT max(x.id) FROM llm_sessions x WHERE x.run_id = r.id)`

const sqlWebRuns = `SELECT ` + sqlWebRunColumns + sqlWebRunFrom

type webRunRow struct {
	ID         int64        `db:"id"`
	MailboxID  int64        `db:"mailbox_id"`
	Phase      string       `db:"phase"`
	Step       string       `db:"step"`
	Attempt    int          `db:"attempt"`
	Status     string       `db:"status"`
	Outcome    string       `db:"outcome"`
	StartedAt  time.Time    `db:"started_at"`
	FinishedAt sql.NullTime `db:"finished_at"`
	Container  string       `db:"container"`
	S          struct {
		Adapter        sql.NullString  `db:"adapter"`
		Model          sql.NullString  `db:"model"`
		Name           sql.NullString  `db:"session_name"`
		NativeID       sql.NullString  `db:"native_id"`
		Resumed        sql.NullBool    `db:"resumed"`
		FallbackReason sql.NullString  `db:"fallback_reason"`
		TokensIn       sql.NullInt64   `db:"tokens_in"`
		TokensOut      sql.NullInt64   `db:"tokens_out"`
		CostUSD        sql.NullFloat64 `db:"cost_usd"`
		ReportedCost   sql.NullFloat64 `db:"reported_cost"`
	} `db:"s"`
}

func (r webRunRow) summary() web.RunSummary {
	out := web.RunSummary{ID: r.ID, MailboxID: r.MailboxID, Phase: r.Phase, Step: r.Step, Attempt: r.Attempt,
		Status: r.Status, Outcome: r.Outcome, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt.Time, Container: r.Container}
	if r.S.Adapter.Valid {
		out.Session = &web.Session{Adapter: r.S.Adapter.String, Model: r.S.Model.String, Name: r.S.Name.String,
			NativeID: r.S.NativeID.String, Resumed: r.S.Resumed.Bool, FallbackReason: r.S.FallbackReason.String,
			TokensIn: r.S.TokensIn.Int64, TokensOut: r.S.TokensOut.Int64, CostUSD: r.S.CostUSD.Float64,
			Rated: r.S.ReportedCost.Float64 > 0}
	}
	return out
}

// Mailbox implements web.Reader.
func (s *Store) Mailbox(ctx context.Context, id int64) (*web.MailboxDetail, error) {
	var row webMailboxRow
	err := s.db.GetContext(ctx, &row, sqlWebMailboxes+` WHERE m.id = $2`, s.now(), id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("mailbox %d: %w", id, web.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read mailbox %d: %w", id, err)
	}
	d := &web.MailboxDetail{MailboxSummary: row.summary(), Branch: row.Branch, MergeRequestNumber: row.MRNumber}
	var runs []webRunRow
	if err := s.db.SelectContext(ctx, &runs, sqlWebRuns+` WHERE r.mailbox_id = $1 ORDER BY r.id`, id); err != nil {
		return nil, fmt.Errorf("list runs of mailbox %d: %w", id, err)
	}
	for _, r := range runs {
		d.Runs = append(d.Runs, r.summary())
	}
	var events []struct {
		Type        string       `db:"event_type"`
		Payload     string       `db:"payload"`
		ReceivedAt  time.Time    `db:"received_at"`
		ProcessedAt sql.NullTime `db:"processed_at"`
		Outcome     string       `db:"outcome"`
	}
	// One more than shown of each list tells whether older entries were left out.
	limit := web.MaxTimelineEvents + 1
	if err := s.db.SelectContext(ctx, &events, sqlWebEvents, id, limit); err != nil {
		return nil, fmt.Errorf("list events of mailbox %d: %w", id, err)
	}
	if len(events) > web.MaxTimelineEvents {
		events, d.TimelineCut = events[:web.MaxTimelineEvents], true
	}
	slices.Reverse(events) // read newest first, appended oldest first
	for _, e := range events {
		d.Timeline = append(d.Timeline, web.TimelineEntry{At: e.ReceivedAt, Kind: "event", Text: eventWords(e.Type, e.Payload)})
		if e.ProcessedAt.Valid && e.Outcome != "" {
			d.Timeline = append(d.Timeline, web.TimelineEntry{At: e.ProcessedAt.Time, Kind: "decision", Text: e.Outcome})
		}
	}
	var changes []struct {
		At   time.Time `db:"at"`
		From string    `db:"from_state"`
		To   string    `db:"to_state"`
	}
	if err := s.db.SelectContext(ctx, &changes, sqlWebStateChanges, id, limit); err != nil {
		return nil, fmt.Errorf("list state changes of mailbox %d: %w", id, err)
	}
	if len(changes) > web.MaxTimelineEvents {
		changes, d.TimelineCut = changes[:web.MaxTimelineEvents], true
	}
	slices.Reverse(changes) // read newest first, appended oldest first
	for _, c := range changes {
		d.Timeline = append(d.Timeline, web.TimelineEntry{At: c.At, Kind: "state", Text: c.From + " → " + c.To})
	}
	for _, r := range d.Runs {
		name := r.Phase
		if r.Step != "" {
			name += "." + r.Step
		}
		d.Timeline = append(d.Timeline, web.TimelineEntry{At: r.StartedAt, Kind: "run", Text: fmt.Sprintf("run %d: %s started (attempt %d)", r.ID, name, r.Attempt)})
		if !r.FinishedAt.IsZero() {
			d.Timeline = append(d.Timeline, web.TimelineEntry{At: r.FinishedAt, Kind: "run", Text: fmt.Sprintf("run %d: %s %s: %s", r.ID, name, r.Status, r.Outcome)})
		}
	}
	var actions []struct {
		Action string    `db:"action"`
		Actor  string    `db:"actor"`
		At     time.Time `db:"at"`
	}
	if err := s.db.SelectContext(ctx, &actions, sqlWebActions, id, row.Forge, row.Repo, limit); err != nil {
		return nil, fmt.Errorf("list operator actions of mailbox %d: %w", id, err)
	}
	if len(actions) > web.MaxTimelineEvents {
		actions, d.TimelineCut = actions[:web.MaxTimelineEvents], true
	}
	slices.Reverse(actions) // read newest first, appended oldest first
	for _, a := range actions {
		d.Timeline = append(d.Timeline, web.TimelineEntry{At: a.At, Kind: "operator", Text: a.Actor + " " + a.Action})
	}
	sortTimeline(d.Timeline)
	if d.Shadow, d.ShadowCut, err = s.webShadow(ctx, id); err != nil {
		return nil, err
	}
	return d, nil
}

// sortTimeline orders entries by time; entries of the same instant keep the order Mailbox
// appends them in: events, their decisions, state changes, runs, operator actions.
func sortTimeline(t []web.TimelineEntry) {
	slices.SortStableFunc(t, func(a, b web.TimelineEntry) int { return a.At.Compare(b.At) })
}

// eventWords says what an event was: "issue_assigned (assigned) by alice".
func eventWords(typ, payload string) string {
	var ev forge.Event
	if json.Unmarshal([]byte(payload), &ev) != nil {
		return typ
	}
	s := typ
	if ev.Action != "" {
		s += " (" + ev.Action + ")"
	}
	if ev.Sender.Login != "" {
		s += " by " + ev.Sender.Login
	}
	return s
}

// Run implements web.Reader.
func (s *Store) Run(ctx context.Context, id int64) (*web.RunDetail, error) {
	var row struct {
		webRunRow
		Repo   string `db:"repo"`
		Number int64  `db:"number"`
		Output string `db:"output"`
	}
	q := `SELECT ` + sqlWebRunColumns + `, m.repo, m.number, r.output` + sqlWebRunFrom +
		` JOIN mailboxes m ON m.id = r.mailbox_id WHERE r.id = $1`
	err := s.db.GetContext(ctx, &row, q, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", id, web.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read run %d: %w", id, err)
	}
	return &web.RunDetail{RunSummary: row.summary(), Repo: row.Repo, Number: row.Number, Output: row.Output}, nil
}
