package mailbox

import (
	"context"
	"time"
)

// Installation-wide control names (Installation.SetControl).
const (
	// ControlDrain stops every replica from claiming new work; passes in progress finish and
	// /readyz answers 200 draining on every replica (deliveries are still stored).
	ControlDrain = "drain"
	// ControlPause stops every claim of every mailbox (the claim queries check it), as a pause
	// of each project would.
	ControlPause = "pause"
)

// InstallationState is what the installation-wide controls say: each set, by whom (an
// operator's identity; "" when off).
type InstallationState struct {
	Draining, Paused    bool
	DrainedBy, PausedBy string
	DrainedAt, PausedAt time.Time
}

// Replica is one process's record of itself (its lease owner): last seen at the store's
// clock, whether it follows a drain, and whether it has drained (draining, no pass in
// progress).
type Replica struct {
	ID                string
	SeenAt            time.Time
	Draining, Drained bool
}

// Installation is the installation-wide controls shared by every replica of one store
// (spec/operations.md, "Controls"). A Store that implements it is followed by Workers.Run:
// before the first claim and then each Poll (at most half a second) the workers read the drain,
// and record their replica when it changed (WorkerConfig.ReplicaHeartbeat otherwise).
// internal/store/sqlstore implements it.
type Installation interface {
	// SetControl turns control name (ControlDrain, ControlPause) on or off for every replica
	// and records who did it (by). Setting a control that is already on keeps its first
	// setter.
	SetControl(ctx context.Context, name string, on bool, by string) error
	// InstallationControls reads the controls.
	InstallationControls(ctx context.Context) (InstallationState, error)
	// RecordReplica records replica r, seen now at the store's clock (r.SeenAt is ignored).
	RecordReplica(ctx context.Context, r Replica) error
	// Replicas returns the replicas seen since since, by id.
	Replicas(ctx context.Context, since time.Time) ([]Replica, error)
}
