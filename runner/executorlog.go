package runner

import (
	"context"
	"fmt"
	"time"
)

// ExecutorStatus is the life stage of a run's container as recorded in the executors table.
type ExecutorStatus string

// The executor statuses. Starting and ready are live: a restarted Alfred looks for their
// containers (see Service.Recover); error and stopped are final.
const (
	// ExecutorStarting: the row is written, the container is being created (it may exist).
	ExecutorStarting ExecutorStatus = "starting"
	// ExecutorReady: the container was created and started; ContainerID is known.
	ExecutorReady ExecutorStatus = "ready"
	// ExecutorError: the container could not be created or removed, or vanished; the message
	// says why.
	ExecutorError ExecutorStatus = "error"
	// ExecutorStopped: the container ended and was removed; its outcome was collected.
	ExecutorStopped ExecutorStatus = "stopped"
)

// Live reports whether the status is starting or ready.
func (s ExecutorStatus) Live() bool { return s == ExecutorStarting || s == ExecutorReady }

// ExecutorRecord is one row of the executors table: one container of one run.
type ExecutorRecord struct {
	ID        int64 `db:"id"`
	RunID     int64 `db:"run_id"`
	MailboxID int64 `db:"mailbox_id"`
	// Runtime names the container runtime ("docker").
	Runtime string `db:"runtime"`
	// ContainerID is set once the container started (status ready); ContainerName always.
	ContainerID   string         `db:"container_id"`
	ContainerName string         `db:"container_name"`
	Status        ExecutorStatus `db:"status"`
	// Adapter is the agent adapter the run used (Agent.Name()), so that a restarted Alfred
	// reads the result with the same adapter.
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

// ExecutorLog records the life of every run container, so that a restarted Alfred can find
// them again (mailbox.Store implements it; runner does not import mailbox).
type ExecutorLog interface {
	// InsertExecutor writes r with status starting before the container is created and sets
	// r.ID. A row with the same container name is an error wrapping ErrNameConflict.
	InsertExecutor(ctx context.Context, r *ExecutorRecord) error
	// ExecutorReady records the started container's id and sets status ready.
	ExecutorReady(ctx context.Context, id int64, container ContainerID) error
	// ExecutorSeen renews last_seen_at (the heartbeat of a live executor).
	ExecutorSeen(ctx context.Context, id int64) error
	// EndExecutor sets the final status (ExecutorError or ExecutorStopped) with a message.
	EndExecutor(ctx context.Context, id int64, status ExecutorStatus, message string) error
	// LiveExecutors returns every executor in status starting or ready, oldest first.
	LiveExecutors(ctx context.Context) ([]ExecutorRecord, error)
	// RunExecutors returns the executors of a run, oldest first.
	RunExecutors(ctx context.Context, runID int64) ([]ExecutorRecord, error)
}

// DefaultHeartbeat is how often a live executor's last_seen_at is renewed when
// Config.Heartbeat is zero.
const DefaultHeartbeat = 30 * time.Second

// executorLife writes one container's executor row; every method is a no-op without a log.
type executorLife struct {
	log   ExecutorLog
	every time.Duration
	id    int64
}

// beginExecutor inserts the starting row of a run's container (nil log: nothing recorded).
func (e *Executor) beginExecutor(ctx context.Context, r ExecutorRecord) (*executorLife, error) {
	l := &executorLife{log: e.cfg.ExecutorLog, every: e.cfg.Heartbeat}
	if l.log == nil {
		return l, nil
	}
	r.Status = ExecutorStarting
	if err := l.log.InsertExecutor(ctx, &r); err != nil {
		return nil, fmt.Errorf("record executor %s: %w", r.ContainerName, err)
	}
	l.id = r.ID
	return l, nil
}

// adoptExecutor continues the row of an executor found again by recovery.
func (e *Executor) adoptExecutor(r ExecutorRecord) *executorLife {
	return &executorLife{log: e.cfg.ExecutorLog, every: e.cfg.Heartbeat, id: r.ID}
}

func (l *executorLife) ready(ctx context.Context, id ContainerID) error {
	if l.log == nil {
		return nil
	}
	if err := l.log.ExecutorReady(ctx, l.id, id); err != nil {
		return fmt.Errorf("record executor ready: %w", err)
	}
	return nil
}

// heartbeat renews last_seen_at until the returned stop function is called.
func (l *executorLife) heartbeat(ctx context.Context) (stop func()) {
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

func (l *executorLife) end(ctx context.Context, status ExecutorStatus, msg string) error {
	if l.log == nil {
		return nil
	}
	if err := l.log.EndExecutor(ctx, l.id, status, msg); err != nil {
		return fmt.Errorf("record executor %s: %w", status, err)
	}
	return nil
}

// endStatus is the final executor status after teardown: error when the container could not
// be removed, stopped otherwise, with a short message.
func endStatus(out *RunOutcome, teardownErr error) (ExecutorStatus, string) {
	if teardownErr != nil {
		return ExecutorError, teardownErr.Error()
	}
	msg := fmt.Sprintf("exit %d", out.Exit.Code)
	if out.Status != "" {
		msg = string(out.Status) + ", " + msg
	}
	if out.Err != nil {
		msg += ": " + out.Err.Error()
	}
	return ExecutorStopped, msg
}
