// Package runner executes agent phases: each phase is one run of a coding-agent CLI in one
// disposable container over the git worktree, or, for a read-only phase bound to an
// API-mode agent, one tool loop in Alfred's own process (APIAgent) with no container at all.
//
// The package holds the seams (Runtime for containers, Agent for CLIs, APIAgent for API mode),
// Compile (a run request and its adapter to a container spec, every mount under data_dir), the
// Executor that starts, waits for and heartbeats a run and records its container
// (ContainerLog), the collection of its logs and result (censored and capped), the Service that
// prepares worktrees, keeps one agent session per issue and publishes (commit and push), and
// the recovery of runs a stopped process left (reattach, collect, reap). The vocabulary shared
// with mailbox is runner/phase. The runtimes live below it: runner/docker (the Docker Engine
// API) and runner/kubernetes (a Pod per run, chosen by runner.runtime: kubernetes); the
// adapters in runner/agent/<cli> and runner/agent/apimode; git in runner/gitrepo.
package runner

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
)

// ContainerID identifies a run's container in its runtime: a Docker container id, or a
// Kubernetes Pod's name (runner/kubernetes).
type ContainerID string

// Mount is a host directory bound into a container.
type Mount struct {
	Source   string `json:"source"` // absolute host path
	Target   string `json:"target"` // absolute container path
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Limits bound a container's resources.
type Limits struct {
	MemoryBytes int64         `json:"memory_bytes"`
	NanoCPUs    int64         `json:"nano_cpus"` // 1e9 = one CPU
	PIDs        int64         `json:"pids"`
	Timeout     time.Duration `json:"timeout"` // wall clock, enforced by the Executor
}

// MilliCPUs is NanoCPUs rounded up to a millicore, the finest CPU quantity Kubernetes counts
// (a Pod's limit, runner/kubernetes.PodFor; the bound config checks requests against).
func (l Limits) MilliCPUs() int64 { return (l.NanoCPUs + 999_999) / 1_000_000 }

// ContainerSpec is everything needed to create one run's container. It never holds a secret
// in Cmd or Labels; secrets go in Env.
type ContainerSpec struct {
	Name       string            `json:"name"`
	Image      string            `json:"image"`
	Cmd        []string          `json:"cmd"`
	Env        []string          `json:"env,omitempty"` // KEY=value
	WorkingDir string            `json:"working_dir"`
	User       string            `json:"user"` // uid:gid, never 0
	Mounts     []Mount           `json:"mounts"`
	Labels     map[string]string `json:"labels"`
	Limits     Limits            `json:"limits"`
	// HostNetwork runs the container in the host's network namespace (tests reach stand-in
	// servers on 127.0.0.1 this way); otherwise the default bridge, or the run's own network
	// when Egress is set. Never together with Egress.
	HostNetwork bool `json:"host_network,omitempty"`
	// Egress, when set, confines the container's network to its allowlist: on Docker the run
	// gets an internal network of its own whose only way out is Alfred's allowlisting proxy
	// (runner/egress; Env names it in HTTP_PROXY and HTTPS_PROXY); on Kubernetes the runs'
	// NetworkPolicy holds the same list. nil: the network is open (runner.egress.mode: open).
	Egress *Egress `json:"egress,omitempty"`
}

// Egress is where a run may connect to: host:port pairs (runner/egress.Allowlist syntax), the
// adapter's provider hosts first, then the operator's runner.egress.allow, without duplicates.
type Egress struct {
	Allow []string `json:"allow"`
}

// EgressAgent is an Agent whose runs must reach its model provider: EgressHosts returns the
// host:port pairs (the provider's API, or the host of the configured base URL) that Compile
// puts first on a run's egress allowlist.
type EgressAgent interface {
	Agent
	EgressHosts() []string
}

// EgressReporter is a Runtime that enforces Egress itself (runner/docker) and can say what a
// run's container was refused: the destinations, each with its count, as "host:port" or
// "host:port (n times)", sorted. It answers until the container is destroyed.
type EgressReporter interface {
	EgressRefused(id ContainerID) []string
}

// ExitState is how a container ended.
type ExitState struct {
	Code int `json:"code"`
	// Killed is true when Alfred stopped the container (timeout or cancel): some CLIs exit 0 on
	// SIGTERM, so the code alone cannot tell.
	Killed    bool   `json:"killed,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	Error     string `json:"error,omitempty"`
	// Disrupted is the cluster's reason when it, not the agent nor Alfred, ended the run
	// (Kubernetes: a node-pressure eviction, a drain or a preemption: the Pod's reason Evicted
	// or its DisruptionTarget condition), "" otherwise: the exit code is then SIGTERM's or
	// SIGKILL's, not the agent's verdict.
	Disrupted string `json:"disrupted,omitempty"`
}

// Container is a container found by Runtime.List.
type Container struct {
	ID      ContainerID
	Name    string
	Labels  map[string]string
	Running bool
}

// Origin says how a Handle came to be held: created by this process, or found again.
type Origin string

// The origins of a Handle.
const (
	// OriginCreated: Runtime.Start created the container for this caller.
	OriginCreated Origin = "created"
	// OriginAdopted: Runtime.Adopt found a container that already existed (a run left by a
	// process that stopped). Nothing removes it implicitly; the recovery path that adopted it
	// decides, and calls Destroy explicitly.
	OriginAdopted Origin = "adopted"
)

// Handle is a container held by a caller, with how it came to be held.
type Handle struct {
	ID   ContainerID
	Name string
	// Origin is OriginCreated for a Handle returned by Start, OriginAdopted for one returned
	// by Adopt.
	Origin Origin
	// Labels are the container's labels (Adopt) or the spec's (Start).
	Labels map[string]string
	// Running and StartedAt describe the container when Adopt found it; Start returns a
	// running container and its start time.
	Running   bool
	StartedAt time.Time
}

// Created reports whether the caller created the container (and so may remove it on teardown).
func (h Handle) Created() bool { return h.ID != "" && h.Origin == OriginCreated }

// Teardown removes the container of h when h was created by the caller, and does nothing for
// an adopted one: teardown never removes what the caller did not create. The recovery path
// removes an adopted container with an explicit Runtime.Destroy once it has decided to.
func Teardown(ctx context.Context, rt Runtime, h Handle) error {
	if !h.Created() {
		return nil
	}
	return rt.Destroy(ctx, h.ID)
}

// LeftoverSweeper is a Runtime that keeps objects of its own beside a run's container (the
// Kubernetes runtime: the run's environment Secret, created just before its Pod): one left
// behind when the process stopped between the two creations outlives every container sweep.
// SweepLeftovers removes those carrying every label of want whose container is gone, and
// returns their names; Service.ReapLeftovers calls it at start-up.
type LeftoverSweeper interface {
	SweepLeftovers(ctx context.Context, want map[string]string) ([]string, error)
}

// Runtime creates and destroys disposable containers.
type Runtime interface {
	// Start creates and starts the container. Creating is never resuming: a name already held
	// by any container, running or stopped, Alfred's or not, is refused with an error wrapping
	// ErrNameConflict and the holder is left untouched (it may be another process's live run).
	// A missing image is an error wrapping ErrImageNotFound (there is no pull). A spec whose
	// User is empty or root (uid 0) is refused. If the container was created but could not be
	// started, the container this call created (by id) is removed. The Handle's Origin is
	// OriginCreated.
	Start(ctx context.Context, spec ContainerSpec) (Handle, error)
	// Adopt finds an existing container by name or id: the one explicit path to take over a
	// container this caller did not create (start-up recovery). The container must carry
	// LabelManaged=true (else ErrNotManaged); a missing one is ErrContainerNotFound. The
	// Handle's Origin is OriginAdopted, with Running and StartedAt filled.
	Adopt(ctx context.Context, ref string) (Handle, error)
	// Wait blocks until the container exits or ctx ends (then it returns ctx.Err()). The
	// ExitState's Killed is true when Stop was called for the container through this Runtime.
	Wait(ctx context.Context, id ContainerID) (ExitState, error)
	// Logs returns the container's stdout and stderr, demultiplexed, stdout first.
	Logs(ctx context.Context, id ContainerID) (stdout, stderr []byte, err error)
	// Stop sends SIGTERM, waits grace, then SIGKILL. A container that is already stopped or
	// gone is not an error.
	Stop(ctx context.Context, id ContainerID, grace time.Duration) error
	// Destroy stops and removes the container; nil if it is already gone.
	Destroy(ctx context.Context, id ContainerID) error
	// List returns the containers carrying all the given labels.
	List(ctx context.Context, labels map[string]string) ([]Container, error)
}

// Agent is the pure adapter for one coding-agent CLI: it compiles an Input into a command line
// and environment, and reads the CLI's output back into a Result.
type Agent interface {
	// Name is the adapter name used in config ("script", "claude-code").
	Name() string
	// Command returns the container image, command line and environment for a run. It puts no
	// secret in the command line.
	Command(in phase.Input) (Invocation, error)
	// Result reads the run's outcome from the exit state, the CLI's stdout and the output
	// directory (where result.json is expected). A missing or invalid result is an error.
	Result(in phase.Input, exit ExitState, stdout []byte, outDir string) (*phase.Result, error)
}

// Invocation is an Agent's compiled command.
type Invocation struct {
	// Image is the container image reference; it must already exist locally (no pull).
	Image string `json:"image"`
	// Cmd is the container command (appended to the image's ENTRYPOINT, if any). No secrets.
	Cmd []string `json:"cmd"`
	// Env holds KEY=value pairs, the only place for secrets.
	Env []string `json:"env,omitempty"`
	// Files are extra files written to the input directory (/alfred/in) before the run,
	// base name → content. Names are plain file names (no "/"), never "input.json".
	Files map[string][]byte `json:"files,omitempty"`
}

// LogWriter receives a run's output as it is produced (optional).
type LogWriter = io.Writer

// Paths inside every run container.
const (
	WorkspaceDir = "/workspace"
	InputDir     = "/alfred/in"
	OutputDir    = "/alfred/out"
	HomeDir      = "/alfred/home"
)

// Labels Alfred puts on every container it creates, so that a restarted Alfred finds them.
const (
	LabelManaged = "alfred.managed" // "true"
	LabelMailbox = "alfred.mailbox" // mailbox id, decimal
	LabelRun     = "alfred.run"     // run id, decimal
	LabelPhase   = "alfred.phase"   // Phase
	LabelAttempt = "alfred.attempt" // attempt number, decimal from 1
	// LabelInstance names the Alfred installation (Config.Instance): start-up cleanup and
	// orphan sweeps touch only their own installation's containers on a shared Docker daemon.
	LabelInstance = "alfred.instance"
)

// Errors shared by runtimes and adapters; match them with errors.Is.
var (
	// ErrImageNotFound: the run's image is not present on the daemon (no registry, no pull).
	ErrImageNotFound = errors.New("container image not found")
	// ErrNameConflict: a container with the run's name already exists (running or stopped).
	// Start never removes it; only the recovery path adopts (Runtime.Adopt) or removes it.
	ErrNameConflict = errors.New("container name held by another container")
	// ErrContainerNotFound: Adopt found no container by that name or id.
	ErrContainerNotFound = errors.New("container not found")
	// ErrNotManaged: Adopt found a container that does not carry LabelManaged=true.
	ErrNotManaged = errors.New("container is not managed by Alfred")
	// ErrSessionNotFound: the CLI could not resume the requested session.
	ErrSessionNotFound = errors.New("agent session not found")
)
