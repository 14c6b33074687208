package runner

import (
	"context"
	"fmt"
	"time"
)

// ContainerStatus is the life stage of a run's container as recorded in its ContainerRecord
// (the status column of the executors table).
type ContainerStatus string

// The container statuses. Starting and ready are live: a restarted Alfred looks for their
// containers (see Service.Recover); error and stopped are final.
const (
	// ContainerStarting: the row is written, the container is being created (it may exist).
	ContainerStarting ContainerStatus = "starting"
	// ContainerReady: the container was created and started; ContainerID is known.
	ContainerReady ContainerStatus = "ready"
	// ContainerError: the container could not be created or removed, or vanished; the message
	// says why.
	ContainerError ContainerStatus = "error"
	// ContainerStopped: the container ended and was removed; its outcome was collected.
	ContainerStopped ContainerStatus = "stopped"
)

// Live reports whether the status is starting or ready.
func (s ContainerStatus) Live() bool { return s == ContainerStarting || s == ContainerReady }

// ContainerRecord is the record of one container of one run, a row of the executors table:
// written before the container is created and ended after it is removed, so that a restarted
// Alfred finds the container again.
type ContainerRecord struct {
	ID        int64 `db:"id"`
	RunID     int64 `db:"run_id"`
	MailboxID int64 `db:"mailbox_id"`
	// Runtime names the container runtime ("docker").
	Runtime string `db:"runtime"`
	// ContainerID is set once the container started (status ready); ContainerName always.
	ContainerID   string          `db:"container_id"`
	ContainerName string          `db:"container_name"`
	Status        ContainerStatus `db:"status"`
	// Adapter is the configured name of the agent the run used (its key in Config.Agents, e.g.
	// "claude-main", not the adapter kind "claude-code"), so that a restarted Alfred reads the
	// result with the same agent.
	Adapter string `db:"adapter"`
	// WorkspacePath is the host path of the run's worktree; Branch the branch it holds.
	WorkspacePath string `db:"workspace_path"`
	Branch        string `db:"branch"`
	// SupportsSessionResume and NativeSessionID describe the agent session of the run: set by
	// the Executor when the run has a session mount (the id when known before the run), and
	// completed when the run's llm_sessions row is recorded.
	SupportsSessionResume bool      `db:"supports_session_resume"`
	NativeSessionID       string    `db:"native_session_id"`
	LastSeenAt            time.Time `db:"last_seen_at"`
	ErrorMessage          string    `db:"error_message"`
	CreatedAt             time.Time `db:"created_at"`
}

// ContainerLog keeps the ContainerRecord of every run container, so that a restarted Alfred can
// find them again. The store implements it; runner does not import the store.
type ContainerLog interface {
	// InsertExecutor writes r with status starting before the container is created and sets
	// r.ID. A row with the same container name is an error wrapping ErrNameConflict.
	InsertExecutor(ctx context.Context, r *ContainerRecord) error
	// ExecutorReady records the started container's id and sets status ready.
	ExecutorReady(ctx context.Context, id int64, container ContainerID) error
	// ExecutorSeen renews last_seen_at (the heartbeat of a live container record).
	ExecutorSeen(ctx context.Context, id int64) error
	// EndExecutor sets the final status (ContainerError or ContainerStopped) with a message.
	EndExecutor(ctx context.Context, id int64, status ContainerStatus, message string) error
	// LiveExecutors returns every container record in status starting or ready, oldest first.
	LiveExecutors(ctx context.Context) ([]ContainerRecord, error)
	// RunExecutors returns the container records of a run, oldest first.
	RunExecutors(ctx context.Context, runID int64) ([]ContainerRecord, error)
}

// DefaultHeartbeat is how often a live container record's last_seen_at is renewed when
// Config.Heartbeat is zero.
const DefaultHeartbeat = 30 * time.Second

// containerLife writes one container's record; every method is a no-op without a log.
type containerLife struct {
	log   ContainerLog
	every time.Duration
	id    int64
}

// beginContainer inserts the starting row of a run's container (nil log: nothing recorded).
func (e *Executor) beginContainer(ctx context.Context, r ContainerRecord) (*containerLife, error) {
	l := &containerLife{log: e.cfg.ContainerLog, every: e.cfg.Heartbeat}
	if l.log == nil {
		return l, nil
	}
	r.Status = ContainerStarting
	if err := l.log.InsertExecutor(ctx, &r); err != nil {
		return nil, fmt.Errorf("record container %s: %w", r.ContainerName, err)
	}
	l.id = r.ID
	return l, nil
}

// adoptContainer continues the record of a container found again by recovery.
func (e *Executor) adoptContainer(r ContainerRecord) *containerLife {
	return &containerLife{log: e.cfg.ContainerLog, every: e.cfg.Heartbeat, id: r.ID}
}

func (l *containerLife) ready(ctx context.Context, id ContainerID) error {
	if l.log == nil {
		return nil
	}
	if err := l.log.ExecutorReady(ctx, l.id, id); err != nil {
		return fmt.Errorf("record container ready: %w", err)
	}
	return nil
}

// heartbeat renews last_seen_at until the returned stop function is called.
func (l *containerLife) heartbeat(ctx context.Context) (stop func()) {
	if l.log == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(l.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = l.log.ExecutorSeen(ctx, l.id) // best effort: a missed beat changes nothing
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (l *containerLife) end(ctx context.Context, status ContainerStatus, msg string) error {
	if l.log == nil {
		return nil
	}
	if err := l.log.EndExecutor(ctx, l.id, status, msg); err != nil {
		return fmt.Errorf("record container %s: %w", status, err)
	}
	return nil
}

// endStatus is the final container status after teardown: error when the container could not
// be removed, stopped otherwise, with a short message.
func endStatus(out *RunOutcome, teardownErr error) (ContainerStatus, string) {
	if teardownErr != nil {
		return ContainerError, teardownErr.Error()
	}
	msg := fmt.Sprintf("exit %d", out.Exit.Code)
	if out.Status != "" {
		msg = string(out.Status) + ", " + msg
	}
	if out.Err != nil {
		msg += ": " + out.Err.Error()
	}
	return ContainerStopped, msg
}
