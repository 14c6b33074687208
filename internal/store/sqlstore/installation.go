package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
)

// sqlNotPausedInstallation is true while the installation-wide pause is off; the claims add it
// with sqlNotPaused, so every replica honours a pause on its next claim.
const sqlNotPausedInstallation = `NOT EXISTS (SELECT 1 FROM installation_controls i WHERE i.name = 'pause')`

// Operator actions on the installation, recorded with no mailbox and no project.
const (
	ActionDrain     = "drained the installation"
	ActionUndrain   = "undrained the installation"
	ActionPauseAll  = "paused the installation"
	ActionResumeAll = "resumed the installation"
)

const sqlSetControl = `INSERT INTO installation_controls (name, set_by, set_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO NOTHING`

const sqlClearControl = `DELETE FROM installation_controls WHERE name = $1`

// SetControl implements mailbox.Installation: control name (mailbox.ControlDrain,
// mailbox.ControlPause) on or off for every replica, recorded as an operator action by by.
func (s *Store) SetControl(ctx context.Context, name string, on bool, by string) error {
	var action string
	switch {
	case name == mailbox.ControlDrain && on:
		action = ActionDrain
	case name == mailbox.ControlDrain:
		action = ActionUndrain
	case name == mailbox.ControlPause && on:
		action = ActionPauseAll
	case name == mailbox.ControlPause:
		action = ActionResumeAll
	default:
		return fmt.Errorf("set control %q: no such installation control", name)
	}
	return s.withTx(ctx, func(q querier) error {
		var err error
		if on {
			_, err = q.ExecContext(ctx, sqlSetControl, name, by, s.now())
		} else {
			_, err = q.ExecContext(ctx, sqlClearControl, name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", action, err)
		}
		if _, err := q.ExecContext(ctx, sqlRecordAction, nil, "", "", action, by, s.now()); err != nil {
			return fmt.Errorf("record operator action: %w", err)
		}
		return nil
	})
}

// InstallationControls implements mailbox.Installation. One indexed read of a table of at
// most two rows: cheap enough for every replica each second.
func (s *Store) InstallationControls(ctx context.Context) (mailbox.InstallationState, error) {
	var rows []struct {
		Name  string    `db:"name"`
		SetBy string    `db:"set_by"`
		SetAt time.Time `db:"set_at"`
	}
	if err := s.selectPrepared(ctx, &rows, `SELECT name, set_by, set_at FROM installation_controls`); err != nil {
		return mailbox.InstallationState{}, fmt.Errorf("read the installation controls: %w", err)
	}
	var st mailbox.InstallationState
	for _, r := range rows {
		switch r.Name {
		case mailbox.ControlDrain:
			st.Draining, st.DrainedBy, st.DrainedAt = true, r.SetBy, r.SetAt
		case mailbox.ControlPause:
			st.Paused, st.PausedBy, st.PausedAt = true, r.SetBy, r.SetAt
		}
	}
	return st, nil
}

const sqlRecordReplica = `INSERT INTO replicas (id, seen_at, draining, drained) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, draining = excluded.draining, drained = excluded.drained`

// ReplicaForgotten is how long a replica that no longer records itself keeps its row: a
// process that stopped (every restart is a new replica id) is forgotten a day after it was
// last seen, so the table holds the replicas of the last day, not of every restart ever.
const ReplicaForgotten = 24 * time.Hour

const sqlForgetReplicas = `DELETE FROM replicas WHERE seen_at < $1`

// RecordReplica implements mailbox.Installation. It also forgets the replicas not seen for
// ReplicaForgotten (a statement that finds nothing to delete on a table of a few rows).
func (s *Store) RecordReplica(ctx context.Context, r mailbox.Replica) error {
	now := s.now()
	if _, err := s.db.ExecContext(ctx, sqlRecordReplica, r.ID, now, r.Draining, r.Drained); err != nil {
		return fmt.Errorf("record replica %s: %w", r.ID, err)
	}
	if _, err := s.db.ExecContext(ctx, sqlForgetReplicas, now.Add(-ReplicaForgotten)); err != nil {
		return fmt.Errorf("forget replicas not seen since %s: %w", now.Add(-ReplicaForgotten), err)
	}
	return nil
}

// Replicas implements mailbox.Installation.
func (s *Store) Replicas(ctx context.Context, since time.Time) ([]mailbox.Replica, error) {
	var rows []struct {
		ID       string    `db:"id"`
		SeenAt   time.Time `db:"seen_at"`
		Draining bool      `db:"draining"`
		Drained  bool      `db:"drained"`
	}
	if err := s.selectPrepared(ctx, &rows, `SELECT id, seen_at, draining, drained FROM replicas
WHERE seen_at >= $1 ORDER BY id`, since); err != nil {
		return nil, fmt.Errorf("read the replicas: %w", err)
	}
	out := make([]mailbox.Replica, len(rows))
	for i, r := range rows {
		out[i] = mailbox.Replica{ID: r.ID, SeenAt: r.SeenAt, Draining: r.Draining, Drained: r.Drained}
	}
	return out, nil
}
