package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
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
}

// NewExecutor checks cfg and returns an Executor. Errors: no Runtime, no DataDir, a root
// container user, or a binding naming an adapter missing from Agents.
func NewExecutor(cfg Config) (*Executor, error) {
	switch {
	case cfg.Runtime == nil:
		return nil, errors.New("executor: Runtime is required")
	case cfg.DataDir == "":
		return nil, errors.New("executor: DataDir is required")
	case cfg.UID <= 0:
		return nil, fmt.Errorf("executor: container UID must be > 0, got %d", cfg.UID)
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
	return &Executor{cfg: cfg}, nil
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
	// Result is the agent's validated result (StatusSucceeded only).
	Result *phase.Result `json:"result,omitempty"`
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

// ContainerName returns the container (and run directory) name of a run:
// alfred-mbx<mailbox>-r<run>-<phase>-a<attempt>.
func ContainerName(mailboxID, runID int64, p phase.Phase, attempt int) string {
	return fmt.Sprintf("alfred-mbx%d-r%d-%s-a%d", mailboxID, runID, p, attempt)
}

// RunDir returns DataDir/runs/<name>, the parent of the run's in/ and out/ directories.
func (e *Executor) RunDir(name string) string {
	return filepath.Join(e.cfg.DataDir, "runs", name)
}

// Run executes one phase: it compiles the agent command, writes the input directory
// (input.json plus Invocation.Files), starts the container, waits up to the timeout (then stops
// it: Killed, StatusTimedOut), collects and redacts the logs, asks the agent for the Result,
// and always destroys the container and removes the run directories.
//
// The outcome is non-nil whenever a container was started. The error is non-nil when the run
// could not take place (invalid request, no adapter bound, Invocation or directory failure,
// Start failure such as ErrImageNotFound or ErrNameConflict, a Runtime failure while waiting)
// or when ctx ended (then the outcome has StatusCanceled). Agent-level failures (non-zero exit,
// missing or invalid result, timeout) are reported in RunOutcome.Err with a nil error.
func (e *Executor) Run(ctx context.Context, req RunRequest) (*RunOutcome, error) {
	in, agent, name, err := e.prepare(req)
	if err != nil {
		return nil, err
	}
	inv, err := agent.Command(in)
	if err != nil {
		return nil, fmt.Errorf("run %s: compile %s command: %w", name, agent.Name(), err)
	}
	runDir := e.RunDir(name)
	inDir, outDir, err := e.makeRunDirs(runDir, in, inv)
	removeDirs := func() error {
		if err := os.RemoveAll(runDir); err != nil {
			return fmt.Errorf("remove run dir: %w", err)
		}
		return nil
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("run %s: %w", name, err), removeDirs())
	}
	if err := e.makeConfigRoot(req, in, name); err != nil {
		return nil, errors.Join(fmt.Errorf("run %s: %w", name, err), removeDirs())
	}
	spec := e.spec(req, in, name, inv, inDir, outDir)

	out := &RunOutcome{Name: name, Agent: agent.Name()}
	// The container record is written before the create, so a container never exists unrecorded.
	life, err := e.beginContainer(ctx, ContainerRecord{RunID: req.RunID, MailboxID: req.MailboxID,
		ContainerName: name, Adapter: agent.Name(), WorkspacePath: req.Worktree, Branch: in.Branch,
		// A session mount means an adapter that resumes, with sessions on; the id is known
		// before the run for a resume or a caller-chosen new session (else set when recorded).
		SupportsSessionResume: req.SessionDir != "", NativeSessionID: in.SessionID})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("run %s: %w", name, err), removeDirs())
	}
	h, err := e.cfg.Runtime.Start(ctx, spec)
	if err != nil {
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("run %s: %w", name, err), life.end(cctx, ContainerError, err.Error()), removeDirs())
	}
	id := h.ID
	out.ID = id
	out.Started = time.Now()
	out.RecordErr = life.ready(ctx, id)
	stopBeat := life.heartbeat(ctx)
	defer func() {
		stopBeat()
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
	waitCtx, cancelWait := context.WithTimeout(ctx, timeout)
	exit, waitErr := e.cfg.Runtime.Wait(waitCtx, id)
	cancelWait()
	out.Duration = time.Since(out.Started)
	var runErr error // returned to the caller
	if waitErr != nil {
		if waitCtx.Err() == nil {
			return out, fmt.Errorf("run %s: %w", name, waitErr)
		}
		if ctx.Err() != nil {
			out.Status, out.Err = StatusCanceled, ctx.Err()
			runErr = fmt.Errorf("run %s canceled: %w", name, ctx.Err())
		} else {
			out.Status, out.Err = StatusTimedOut, fmt.Errorf("%w after %s", ErrTimeout, timeout)
		}
		exit = e.stop(ctx, id)
		out.Duration = time.Since(out.Started)
	}
	out.Exit = exit

	lctx, cancelLogs := e.cleanupCtx(ctx)
	stdout, stderr, logErr := e.cfg.Runtime.Logs(lctx, id)
	cancelLogs()
	out.Stdout, out.StdoutTruncated = tail(e.cfg.Redact(string(stdout)), e.cfg.MaxOutputBytes)
	out.Stderr, out.StderrTruncated = tail(e.cfg.Redact(string(stderr)), e.cfg.MaxOutputBytes)

	if out.Status != "" { // timed out or canceled: no result is read
		return out, runErr
	}
	if logErr != nil {
		return out, fmt.Errorf("run %s: %w", name, logErr)
	}
	res, err := agentResult(agent, in, exit, stdout, stderr, outDir)
	if err != nil {
		out.Status, out.Err = StatusFailed, err
		return out, nil
	}
	out.Status, out.Result = StatusSucceeded, res
	return out, nil
}

// stop stops the container on a fresh bounded context and returns its exit state, Killed set.
func (e *Executor) stop(ctx context.Context, id ContainerID) ExitState {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+e.cfg.StopGrace)
	defer cancel()
	var st ExitState
	stopErr := e.cfg.Runtime.Stop(cctx, id, e.cfg.StopGrace)
	st, waitErr := e.cfg.Runtime.Wait(cctx, id)
	if err := errors.Join(stopErr, waitErr); err != nil {
		st.Error = err.Error()
	}
	st.Killed = true
	return st
}

// cleanupCtx returns ctx itself while it is live, else a fresh context bounded by cleanupTimeout.
func (e *Executor) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// prepare validates req and resolves the adapter and the container name.
func (e *Executor) prepare(req RunRequest) (phase.Input, Agent, string, error) {
	in := req.Input
	if req.Attempt < 1 {
		return in, nil, "", fmt.Errorf("run: attempt must be ≥ 1, got %d", req.Attempt)
	}
	if in.Phase == "" {
		return in, nil, "", errors.New("run: input has no phase")
	}
	if !filepath.IsAbs(req.Worktree) {
		return in, nil, "", fmt.Errorf("run: worktree must be an absolute path, got %q", req.Worktree)
	}
	in.Attempt = req.Attempt
	if in.Key == "" {
		in.Key = phase.KeyOf(in.Phase, in.Step)
	}
	agentName, ok := e.cfg.Bindings[in.Phase]
	if !ok {
		return in, nil, "", fmt.Errorf("run: no adapter bound to phase %s", in.Phase)
	}
	agent, ok := e.cfg.Agents[agentName]
	if !ok {
		return in, nil, "", fmt.Errorf("run: unknown adapter %q", agentName)
	}
	return in, agent, ContainerName(req.MailboxID, req.RunID, in.Phase, req.Attempt) + req.NameSuffix, nil
}

// Agent returns the adapter bound to phase and its name.
func (e *Executor) Agent(p phase.Phase) (string, Agent, bool) {
	name, ok := e.cfg.Bindings[p]
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

// makeRunDirs (re)creates runDir/in (input.json and the invocation's files, readable by all)
// and runDir/out (writable by the container user).
func (e *Executor) makeRunDirs(runDir string, in phase.Input, inv Invocation) (inDir, outDir string, err error) {
	if err := os.RemoveAll(runDir); err != nil { // a crashed run's leftovers
		return "", "", fmt.Errorf("clear run dir: %w", err)
	}
	inDir, outDir = filepath.Join(runDir, "in"), filepath.Join(runDir, "out")
	for _, d := range []string{inDir, outDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", "", fmt.Errorf("create run dir: %w", err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // regardless of umask
			return "", "", fmt.Errorf("chmod run dir: %w", err)
		}
	}
	files := map[string][]byte{}
	maps.Copy(files, inv.Files)
	for n := range files {
		if n == "input.json" || n == "" || n == "." || n == ".." || strings.ContainsAny(n, `/\`) {
			return "", "", fmt.Errorf("invalid invocation file name %q", n)
		}
	}
	data, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return "", "", fmt.Errorf("encode input: %w", err)
	}
	files["input.json"] = data
	for n, b := range files {
		p := filepath.Join(inDir, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", "", fmt.Errorf("write %s: %w", n, err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			return "", "", fmt.Errorf("chmod %s: %w", n, err)
		}
	}
	if os.Geteuid() == 0 {
		err = os.Chown(outDir, e.cfg.UID, e.cfg.GID)
	} else {
		err = os.Chmod(outDir, 0o777)
	}
	if err != nil {
		return "", "", fmt.Errorf("give output dir to the container user: %w", err)
	}
	return inDir, outDir, nil
}

// spec builds the ContainerSpec of a run.
func (e *Executor) spec(req RunRequest, in phase.Input, name string, inv Invocation, inDir, outDir string) ContainerSpec {
	env := append([]string{"HOME=" + HomeDir}, inv.Env...)
	mounts := []Mount{
		{Source: filepath.Clean(req.Worktree), Target: WorkspaceDir, ReadOnly: in.Phase.ReadOnly()},
		{Source: inDir, Target: InputDir, ReadOnly: true},
		{Source: outDir, Target: OutputDir},
	}
	if root, _, state, ok := e.sessionMount(req, in, name); ok {
		// Docker would create the parents of the session mount inside the HOME tmpfs owned by
		// root, leaving the CLI's own configuration directory unwritable: a fresh, writable
		// per-run directory is mounted there first (sessionMount's host side is made in Run).
		if root != "" {
			mounts = append(mounts, Mount{Source: filepath.Join(e.RunDir(name), "home"), Target: root})
		}
		// Read-write in every phase, read-only ones included: the session is the agent's memory.
		mounts = append(mounts, Mount{Source: filepath.Clean(req.SessionDir), Target: state})
	}
	return ContainerSpec{
		Name:       name,
		Image:      inv.Image,
		Cmd:        inv.Cmd,
		Env:        env,
		WorkingDir: WorkspaceDir,
		User:       fmt.Sprintf("%d:%d", e.cfg.UID, e.cfg.GID),
		Mounts:     mounts,
		Labels: e.ManagedLabels(map[string]string{
			LabelMailbox: strconv.FormatInt(req.MailboxID, 10),
			LabelRun:     strconv.FormatInt(req.RunID, 10),
			LabelPhase:   string(in.Phase),
			LabelAttempt: strconv.Itoa(req.Attempt),
		}),
		Limits:      e.cfg.Limits,
		HostNetwork: e.cfg.HostNetwork,
	}
}

// sessionMount returns where the session state of the run is mounted: the CLI's configuration
// root (e.g. /alfred/home/.claude, "" when the state path is directly under HOME), the path of
// the state below that root, and the state path itself. ok is false when the run has no
// session mount.
func (e *Executor) sessionMount(req RunRequest, in phase.Input, name string) (root, rel, state string, ok bool) {
	sa, isSession := e.cfg.Agents[e.cfg.Bindings[in.Phase]].(SessionAgent)
	if !isSession || req.SessionDir == "" || sa.Capabilities().SessionStatePath == "" {
		return "", "", "", false
	}
	state = sa.Capabilities().SessionStatePath
	root, rel, _ = ConfigRoot(state)
	return root, rel, state, true
}

// makeConfigRoot creates the per-run configuration root of a session mount, with the
// directories down to the session mount point, owned by the container user.
func (e *Executor) makeConfigRoot(req RunRequest, in phase.Input, name string) error {
	root, rel, _, ok := e.sessionMount(req, in, name)
	if !ok || root == "" {
		return nil
	}
	home := filepath.Join(e.RunDir(name), "home")
	if err := os.MkdirAll(filepath.Join(home, rel), 0o755); err != nil {
		return fmt.Errorf("create the configuration root: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return filepath.WalkDir(home, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, e.cfg.UID, e.cfg.GID)
	})
}

// ManagedLabels returns extra plus the labels that mark a container as this installation's
// (LabelManaged, and LabelInstance when Config.Instance is set).
func (e *Executor) ManagedLabels(extra map[string]string) map[string]string {
	l := map[string]string{LabelManaged: "true"}
	if e.cfg.Instance != "" {
		l[LabelInstance] = e.cfg.Instance
	}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// Reap destroys every Alfred-managed container (LabelManaged=true) for which keep returns false
// (keep nil: all of them); use it at startup and on a timer, with keep joining the labels
// against live leases. It returns the names destroyed; failures are joined.
func (e *Executor) Reap(ctx context.Context, keep func(labels map[string]string) bool) ([]string, error) {
	list, err := e.cfg.Runtime.List(ctx, e.ManagedLabels(nil))
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	var names []string
	var errs []error
	for _, c := range list {
		if keep != nil && keep(c.Labels) {
			continue
		}
		if err := e.cfg.Runtime.Destroy(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("reap %s: %w", c.Name, err))
			continue
		}
		names = append(names, c.Name)
	}
	return names, errors.Join(errs...)
}

// tail returns the last max bytes of s (cut at a UTF-8 boundary, behind a marker line) and
// whether anything was dropped.
func tail(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	cut := len(s) - max
	for cut < len(s) && cut > 0 && !isRuneStart(s[cut]) {
		cut++
	}
	return fmt.Sprintf("[… %d bytes truncated …]\n", cut) + s[cut:], true
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
