package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
)

// Defaults used by the Executor when the corresponding Config field is zero.
const (
	DefaultTimeout        = time.Hour
	DefaultStopGrace      = 10 * time.Second
	DefaultMaxOutputBytes = 64 << 10
	// cleanupTimeout bounds Stop/Logs/Destroy on a fresh context once the run's ctx is done.
	cleanupTimeout = time.Minute
)

// ErrTimeout is the RunOutcome.Err of a run stopped because it exceeded the wall-clock timeout.
var ErrTimeout = errors.New("run timed out")

// Config configures an Executor.
type Config struct {
	// Runtime runs the containers.
	Runtime Runtime
	// Agents are the adapters by name (Agent.Name()).
	Agents map[string]Agent
	// Bindings names the adapter of each phase. A phase without a binding cannot run.
	Bindings map[phase.Phase]string
	// DataDir holds the per-run input and output directories, DataDir/runs/<name>/{in,out},
	// removed when the run ends.
	DataDir string
	// UID and GID are the container user (never 0); the output directory is chowned to them
	// when the process runs as root, and made world-writable otherwise.
	UID, GID int
	// Limits are the container resources of every run (Limits.Timeout is the timeout when
	// Timeout is zero).
	Limits Limits
	// Timeout is the wall-clock limit of a run, from start to exit (DefaultTimeout if zero and
	// Limits.Timeout is zero too).
	Timeout time.Duration
	// StopGrace is the SIGTERM→SIGKILL grace when a run is stopped (DefaultStopGrace if zero).
	StopGrace time.Duration
	// HostNetwork runs containers in the host's network namespace (ContainerSpec.HostNetwork).
	HostNetwork bool
	// Egress is the egress allowlist of every run (CompileConfig.Egress); nil: open.
	Egress *EgressPolicy
	// Redact censors secrets in the container output kept in RunOutcome (identity if nil).
	Redact func(string) string
	// MaxOutputBytes caps each of RunOutcome.Stdout and Stderr, keeping the tail
	// (DefaultMaxOutputBytes if zero).
	MaxOutputBytes int
	// ContainerLog records every run container in the executors table (starting before the
	// create, ready after the start, a heartbeat while it runs, stopped or error at the end),
	// so a restarted Alfred can find it again. nil records nothing (and Recover then treats
	// every unfinished run as interrupted).
	ContainerLog ContainerLog
	// Instance identifies this installation on a shared Docker daemon (LabelInstance); every
	// container gets it and Reap and RemoveOrphans only look at containers carrying it. ""
	// means no instance label (all managed containers are Alfred's).
	Instance string
	// Heartbeat is how often a running container's container record is renewed
	// (DefaultHeartbeat if zero).
	Heartbeat time.Duration
}

// Executor runs one agent phase per call in a disposable container. It is safe for concurrent
// use by runs with distinct names.
type Executor struct {
	cfg Config
	cc  CompileConfig
}

// processUID is the effective uid of the process (a variable for the tests, which run as root).
var processUID = os.Geteuid

// NewExecutor checks cfg and returns an Executor. Errors: no Runtime, no DataDir, a root
// container user, a container user other than Alfred's own when Alfred is not root (it could
// not hand the run its worktree), or a binding naming an adapter missing from Agents.
func NewExecutor(cfg Config) (*Executor, error) {
	switch {
	case cfg.Runtime == nil:
		return nil, errors.New("executor: Runtime is required")
	case cfg.DataDir == "":
		return nil, errors.New("executor: DataDir is required")
	case cfg.UID <= 0:
		return nil, fmt.Errorf("executor: container UID must be > 0, got %d", cfg.UID)
	case processUID() != 0 && cfg.UID != processUID():
		// Only root can give the worktree, the run's home and its session state to another
		// user: the run would find them unwritable (EACCES) with no earlier error.
		return nil, fmt.Errorf("executor: Alfred runs as uid %d, not root, so the runs' user must be the same: set runner.uid to %d (and runner.gid to Alfred's gid), or run Alfred as uid %d",
			processUID(), processUID(), cfg.UID)
	}
	for p, name := range cfg.Bindings {
		if _, ok := cfg.Agents[name]; !ok {
			return nil, fmt.Errorf("executor: phase %s is bound to unknown adapter %q", p, name)
		}
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("executor: resolve data dir: %w", err)
	}
	cfg.DataDir = abs
	if cfg.Timeout <= 0 {
		cfg.Timeout = cfg.Limits.Timeout
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.Limits.Timeout = cfg.Timeout
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	return &Executor{cfg: cfg, cc: CompileConfig{DataDir: cfg.DataDir, UID: cfg.UID, GID: cfg.GID,
		Limits: cfg.Limits, HostNetwork: cfg.HostNetwork, Instance: cfg.Instance, Egress: cfg.Egress}}, nil
}

// RunRequest identifies one run and carries its input.
type RunRequest struct {
	MailboxID int64
	RunID     int64
	// Attempt counts from 1; it overrides Input.Attempt.
	Attempt int
	// Input is given to the agent; Input.Key is derived from Phase and Step when empty.
	Input phase.Input
	// Worktree is the host path of the run's git worktree, mounted at /workspace (read-only
	// when Input.Phase.ReadOnly()).
	Worktree string
	// SessionDir is the host directory of the mailbox's session state for the phase's adapter,
	// mounted read-write at its Capabilities().SessionStatePath in every phase; "" for none
	// (sessions off, or an adapter without resumable sessions).
	SessionDir string
	// Timeout overrides the configured wall-clock limit when > 0 (a fresh re-invocation after a
	// refused resume gets what is left of the run's limit).
	Timeout time.Duration
	// NameSuffix is appended to the container name, for a second invocation within one run.
	NameSuffix string
}

// OutcomeStatus summarises how a run ended.
type OutcomeStatus string

// The outcome statuses.
const (
	StatusSucceeded OutcomeStatus = "succeeded" // exit 0 and a valid Result
	StatusFailed    OutcomeStatus = "failed"    // non-zero exit, or missing/invalid result
	StatusTimedOut  OutcomeStatus = "timed_out" // killed after the wall-clock timeout
	StatusCanceled  OutcomeStatus = "canceled"  // killed because the caller's ctx ended
	StatusDetached  OutcomeStatus = "detached"  // left running: the ctx ended with phase.ErrDetach
)

// RunOutcome is what happened in one run.
type RunOutcome struct {
	// Name is the container name, see ContainerName; ID the container's id.
	Name string      `json:"name"`
	ID   ContainerID `json:"id,omitempty"`
	// Agent is the adapter name used.
	Agent  string        `json:"agent"`
	Status OutcomeStatus `json:"status"`
	Exit   ExitState     `json:"exit"`
	// Stdout and Stderr are the redacted tails of the container output, at most
	// Config.MaxOutputBytes each; the Truncated flags tell whether the head was dropped.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// LogsDropped is how many bytes the Runtime dropped from the middle of a flood of output
	// (beyond MaxLogBytes per stream, head and tail kept); 0 for most runs.
	LogsDropped int64 `json:"logs_dropped,omitempty"`
	// Result is the agent's validated result (StatusSucceeded only).
	Result *phase.Result `json:"result,omitempty"`
	// Usage is the provider's usage of an API-mode run, also when it failed; nil for a
	// container run (its usage is in Result).
	Usage *Usage `json:"usage,omitempty"`
	// EgressRefused lists the destinations the run's egress proxy refused, with their counts
	// ("host:port (n times)"); also the last line of Stderr.
	EgressRefused []string `json:"egress_refused,omitempty"`
	// Err is why the run did not succeed: ErrTimeout, the agent's Result error (which may wrap
	// ErrNoResult, ErrInvalidResult, ErrSessionNotFound), or the ctx error when canceled.
	Err error `json:"-"`
	// CleanupErr is a failure to destroy the container or remove the run directories; the
	// run's own outcome stands (Reap catches leftover containers).
	CleanupErr error `json:"-"`
	// RecordErr is a failure to record the container's ready or final state in the
	// ContainerLog; the run's own outcome stands (recovery finds the container by name).
	RecordErr error `json:"-"`
	// Started is when the container was started; Duration runs from there to exit.
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
}

// Name returns the run's container name: ContainerName of the request plus NameSuffix.
func (r RunRequest) Name() string {
	return ContainerName(r.MailboxID, r.RunID, r.Input.Phase, r.Attempt) + r.NameSuffix
}

// RunDir returns DataDir/runs/<name>, the parent of the run's in/ and out/ directories.
func (e *Executor) RunDir(name string) string { return e.cc.RunDir(name) }

// sweepRunDirs removes the run directories (DataDir/runs/<name>) of this installation whose
// mailbox keep rejects: a process killed between laying a run out and starting (or tearing
// down) its container leaves one behind. Names are read as InstanceName made them.
func (e *Executor) sweepRunDirs(keep func(mailboxID int64) bool) error {
	root := filepath.Dir(e.cc.RunDir("x"))
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list run directories: %w", err)
	}
	prefix := e.cc.InstanceName("alfred-mbx")
	var errs []error
	for _, en := range entries {
		var id int64
		rest, ok := strings.CutPrefix(en.Name(), prefix)
		if !ok || !en.IsDir() {
			continue // another installation's, or not a run
		}
		if _, perr := fmt.Sscanf(rest, "%d-", &id); perr != nil || keep(id) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, en.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove run directory %s: %w", en.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Run executes one phase: it compiles the run (Compile), lays out the run directory (input.json
// plus Invocation.Files), records the container (ContainerLog), starts it, and collects it
// (collect: waits up to the timeout, then stops it: Killed, StatusTimedOut; reads the redacted
// logs and the agent's Result); it always destroys the container and removes the run directory.
//
// The outcome is non-nil whenever a container was started. The error is non-nil when the run
// could not take place (invalid request, no adapter bound, Invocation or directory failure,
// Start failure such as ErrImageNotFound or ErrNameConflict), when the Runtime failed while
// waiting or reading the logs (see collect), or when ctx ended (then the outcome has
// StatusCanceled). Agent-level failures (non-zero exit, missing or invalid result, timeout)
// are reported in RunOutcome.Err with a nil error.
func (e *Executor) Run(ctx context.Context, req RunRequest) (*RunOutcome, error) {
	agentName, agent, ok := e.Agent(req.Input)
	if !ok {
		return nil, fmt.Errorf("run: no adapter bound to phase %s", req.Input.Phase)
	}
	if aa, ok := agent.(APIAgent); ok {
		return e.runAPI(ctx, req, aa) // API mode: no container
	}
	c, err := Compile(e.cc, req, agent)
	if err != nil {
		return nil, err
	}
	name, runDir := c.Name, e.RunDir(c.Name)
	removeDirs := func() error {
		if err := os.RemoveAll(runDir); err != nil {
			return fmt.Errorf("remove run dir: %w", err)
		}
		return nil
	}
	if err := layOut(runDir, c, e.cfg.UID, e.cfg.GID); err != nil {
		return nil, errors.Join(fmt.Errorf("run %s: %w", name, err), removeDirs())
	}

	out := &RunOutcome{Name: name, Agent: agent.Name()}
	// The container record is written before the create, so a container never exists unrecorded.
	life, err := e.beginContainer(ctx, ContainerRecord{RunID: req.RunID, MailboxID: req.MailboxID,
		ContainerName: name, Adapter: agentName, WorkspacePath: req.Worktree, Branch: c.Input.Branch,
		// A session mount means an adapter that resumes, with sessions on; the id is known
		// before the run for a resume or a caller-chosen new session (else set when recorded).
		SupportsSessionResume: req.SessionDir != "", NativeSessionID: c.Input.SessionID})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("run %s: %w", name, err), removeDirs())
	}
	h, err := e.cfg.Runtime.Start(ctx, c.Spec)
	if err != nil {
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("run %s: %w", name, err), life.end(cctx, ContainerError, err.Error()), removeDirs())
	}
	out.ID = h.ID
	out.Started = time.Now()
	out.RecordErr = life.ready(ctx, h.ID)
	defer func() {
		if out.Status == StatusDetached {
			return // the container, its run directory and its record stay for the next process
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+e.cfg.StopGrace)
		defer cancel()
		var errs []error
		teardownErr := Teardown(cctx, e.cfg.Runtime, h) // removes only what this run created
		if teardownErr != nil {
			errs = append(errs, fmt.Errorf("destroy container: %w", teardownErr))
		}
		errs = append(errs, removeDirs())
		out.CleanupErr = errors.Join(errs...)
		status, msg := endStatus(out, teardownErr)
		out.RecordErr = errors.Join(out.RecordErr, life.end(cctx, status, msg))
	}()

	timeout := e.cfg.Timeout
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	err = e.collect(ctx, collection{h: h, agent: agent, in: c.Input, outDir: filepath.Join(runDir, "out"),
		wait: timeout, limit: timeout, life: life}, out)
	switch {
	case err != nil:
		return out, fmt.Errorf("run %s: %w", name, err)
	case out.Status == StatusCanceled:
		return out, fmt.Errorf("run %s canceled: %w", name, out.Err)
	case out.Status == StatusDetached:
		return out, fmt.Errorf("run %s detached: %w", name, out.Err)
	}
	return out, nil
}

// Agent returns the adapter that runs in and its name: in.Agent when set (the project's own
// binding of the phase), else the phase's binding.
func (e *Executor) Agent(in phase.Input) (string, Agent, bool) {
	name, ok := in.Agent, in.Agent != ""
	if !ok {
		name, ok = e.cfg.Bindings[in.Phase]
	}
	if !ok {
		return "", nil, false
	}
	a, ok := e.cfg.Agents[name]
	return name, a, ok
}

// Timeout returns the configured wall-clock limit of a run.
func (e *Executor) Timeout() time.Duration { return e.cfg.Timeout }

// Runtime returns the container runtime.
func (e *Executor) Runtime() Runtime { return e.cfg.Runtime }

// UID returns the container user.
func (e *Executor) UID() int { return e.cfg.UID }

// GID returns the container user's group.
func (e *Executor) GID() int { return e.cfg.GID }

// ManagedLabels returns extra plus the labels that mark a container as this installation's
// (LabelManaged, and LabelInstance when Config.Instance is set).
func (e *Executor) ManagedLabels(extra map[string]string) map[string]string {
	return e.cc.ManagedLabels(extra)
}

// Reap destroys every Alfred-managed container (LabelManaged=true) for which keep returns false
// (keep nil: all of them); use it at startup and on a timer, with keep joining the labels
// against live leases. It returns the names destroyed; failures are joined.
func (e *Executor) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	list, err := e.cfg.Runtime.List(ctx, e.ManagedLabels(nil))
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	return e.destroyAll(ctx, "reap", list, func(c Container) bool { return keep != nil && keep(c.Labels) })
}

// destroyAll destroys every container of list for which keep returns false and returns the
// names destroyed; each failure is wrapped with what (the caller's verb) and the container's
// name, and the failures are joined.
func (e *Executor) destroyAll(ctx context.Context, what string, list []Container, keep func(Container) bool) ([]string, error) {
	var names []string
	var errs []error
	for _, c := range list {
		if keep(c) {
			continue
		}
		if err := e.cfg.Runtime.Destroy(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", what, c.Name, err))
			continue
		}
		names = append(names, c.Name)
	}
	return names, errors.Join(errs...)
}
