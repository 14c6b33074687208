package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/alfred-bot/alfred/runner/phase"
)

// CompileConfig is the installation's side of Compile: where run directories live and the
// container policy every run gets. Compile reads no file and creates none; these paths are only
// named in the spec.
type CompileConfig struct {
	// DataDir is the absolute host directory holding the run directories,
	// DataDir/runs/<name>/{in,out,home}.
	DataDir string
	// UID and GID are the container user (never 0).
	UID, GID int
	// Limits are the container resources of every run.
	Limits Limits
	// HostNetwork runs containers in the host's network namespace (ContainerSpec.HostNetwork).
	HostNetwork bool
	// Instance is the LabelInstance value of every container; "" puts no instance label.
	Instance string
	// Egress, when set, is the egress policy of every run (ContainerSpec.Egress): Allow holds
	// the operator's host:port pairs, to which each run adds its adapter's (EgressAgent).
	// nil: the network is open.
	Egress *EgressPolicy
}

// EgressPolicy is the installation's egress allowlist (runner.egress).
type EgressPolicy struct {
	// Allow are the operator's host:port pairs every run may reach besides its adapter's.
	Allow []string
	// ProxyURL, when set, is put in the run's HTTP_PROXY and HTTPS_PROXY (and their lower-case
	// twins), with NO_PROXY=localhost,127.0.0.1: the Docker runtime's proxy
	// (runner/egress.ProxyURL). "" on Kubernetes, where a NetworkPolicy holds the list.
	ProxyURL string
}

// egressOf returns the run's egress allowlist: agent's hosts, then policy's, without
// duplicates.
func egressOf(policy *EgressPolicy, agent Agent) *Egress {
	if policy == nil {
		return nil
	}
	var hosts []string
	if ea, ok := agent.(EgressAgent); ok {
		hosts = append(hosts, ea.EgressHosts()...)
	}
	hosts = append(hosts, policy.Allow...)
	e := &Egress{Allow: []string{}}
	seen := map[string]bool{}
	for _, h := range hosts {
		if k := strings.ToLower(h); !seen[k] {
			seen[k] = true
			e.Allow = append(e.Allow, h)
		}
	}
	return e
}

// egressEnv is the proxy environment of a run behind policy's proxy.
func egressEnv(policy *EgressPolicy) []string {
	if policy == nil || policy.ProxyURL == "" {
		return nil
	}
	u := policy.ProxyURL
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1"}
}

// InstanceName returns name (a ContainerName, "alfred-…") with the installation's Instance put
// after "alfred-": alfred-<instance>-mbx<mailbox>-…. Container names are global on a Docker
// daemon while mailbox and run ids are per database, so two installations (or two test
// suites) sharing a daemon would otherwise claim the same names. Without an Instance the
// name is returned as it is.
//
// A name is at most MaxContainerName characters (it is also the container's host name, a DNS
// label): a longer one keeps its first characters and ends in a hash of the whole, so it stays
// unique and the same for the same run.
func (c CompileConfig) InstanceName(name string) string {
	if c.Instance != "" {
		name = "alfred-" + c.Instance + "-" + strings.TrimPrefix(name, "alfred-")
	}
	if len(name) <= MaxContainerName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:MaxContainerName-9] + "-" + hex.EncodeToString(sum[:4])
}

// InstanceID is the default name of an installation on a shared Docker daemon or runs'
// namespace (the Instance of its CompileConfig, unless the configuration's runner.instance
// names it): the first 12 hex digits of the SHA-256 of its absolute data directory. Replicas
// sharing a data directory (and a database) are one installation; another installation's
// containers are never reaped, as long as its instance differs: two installations with the
// same data directory path (in two containers, or two clusters' Pods) set runner.instance.
func InstanceID(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// MaxContainerName is the longest container name InstanceName returns: 63, a DNS label.
const MaxContainerName = 63

// RunDir returns DataDir/runs/<name>, the parent of the run's in/, out/ and home/ directories.
func (c CompileConfig) RunDir(name string) string {
	return filepath.Join(c.DataDir, "runs", name)
}

// ManagedLabels returns extra plus the labels that mark a container as this installation's
// (LabelManaged, and LabelInstance when Instance is set).
func (c CompileConfig) ManagedLabels(extra map[string]string) map[string]string {
	l := map[string]string{LabelManaged: "true"}
	if c.Instance != "" {
		l[LabelInstance] = c.Instance
	}
	maps.Copy(l, extra)
	return l
}

// Compiled is one run compiled by Compile: the container to create, and what the Executor lays
// out on the host before creating it.
type Compiled struct {
	// Name is the container name and the base name of the run directory (see ContainerName).
	Name string `json:"name"`
	// Input is the input given to the agent: the request's, with Attempt and Key filled.
	Input phase.Input `json:"-"`
	// Spec is the container to create.
	Spec ContainerSpec `json:"spec"`
	// Files are the files of the input directory (RunDir/in, mounted at InputDir), base name →
	// content: input.json and the adapter's Invocation.Files.
	Files map[string][]byte `json:"-"`
	// HomeDirs is the path, relative to RunDir/home, of the directories to create for the
	// session mount inside the CLI's configuration root (e.g. "projects/-workspace" for Claude
	// Code); "" when the run mounts no configuration root.
	HomeDirs string `json:"home_dirs,omitempty"`
}

// Compile turns one run into its container spec: the pure step between a phase request and
// Docker. agent is the adapter bound to the request's phase. The spec mounts req.Worktree at
// WorkspaceDir (read-only when the phase is read-only), RunDir/in read-only at InputDir,
// RunDir/out at OutputDir and, when req.SessionDir is set and agent is a SessionAgent with a
// SessionStatePath, the session directory read-write at that path (in every phase: the session
// is the agent's memory), behind a fresh per-run configuration root (RunDir/home) when the path
// is nested in one. Every container runs as cfg's user with HOME=HomeDir and the managed
// labels; the runtime makes its root filesystem read-only.
//
// With cfg.Egress the spec carries the run's allowlist (the adapter's EgressHosts, then the
// operator's) and, behind a proxy, the proxy's environment before the adapter's.
//
// Errors: an attempt below 1, an input without a phase, a worktree that is not an absolute
// path, the host network together with an egress policy, an adapter whose Command fails, or an invocation file named input.json, "", "." or
// "..", or holding a path separator.
func Compile(cfg CompileConfig, req RunRequest, agent Agent) (Compiled, error) {
	in := req.Input
	switch {
	case req.Attempt < 1:
		return Compiled{}, fmt.Errorf("run: attempt must be ≥ 1, got %d", req.Attempt)
	case in.Phase == "":
		return Compiled{}, errors.New("run: input has no phase")
	case !filepath.IsAbs(req.Worktree):
		return Compiled{}, fmt.Errorf("run: worktree must be an absolute path, got %q", req.Worktree)
	case cfg.HostNetwork && cfg.Egress != nil:
		return Compiled{}, errors.New("run: the host network is outside the egress allowlist: use one or the other")
	}
	in.Attempt = req.Attempt
	if in.Key == "" {
		in.Key = phase.KeyOf(in.Phase, in.Step)
	}
	name := cfg.InstanceName(req.Name())
	inv, err := agent.Command(in)
	if err != nil {
		return Compiled{}, fmt.Errorf("run %s: compile %s command: %w", name, agent.Name(), err)
	}
	files, err := inputFiles(in, inv)
	if err != nil {
		return Compiled{}, fmt.Errorf("run %s: %w", name, err)
	}
	runDir := cfg.RunDir(name)
	c := Compiled{Name: name, Input: in, Files: files}
	mounts := []Mount{
		{Source: filepath.Clean(req.Worktree), Target: WorkspaceDir, ReadOnly: in.Phase.ReadOnly()},
		{Source: filepath.Join(runDir, "in"), Target: InputDir, ReadOnly: true},
		{Source: filepath.Join(runDir, "out"), Target: OutputDir},
	}
	if state := sessionStatePath(agent, req.SessionDir); state != "" {
		// Docker would create the parents of the session mount inside the HOME tmpfs owned by
		// root, leaving the CLI's own configuration directory unwritable: a fresh, writable
		// per-run directory is mounted there first.
		if root, rel, ok := ConfigRoot(state); ok {
			mounts = append(mounts, Mount{Source: filepath.Join(runDir, "home"), Target: root})
			c.HomeDirs = rel
		}
		mounts = append(mounts, Mount{Source: filepath.Clean(req.SessionDir), Target: state})
	}
	c.Spec = ContainerSpec{
		Name:       name,
		Image:      inv.Image,
		Cmd:        inv.Cmd,
		Env:        append(append([]string{"HOME=" + HomeDir}, egressEnv(cfg.Egress)...), inv.Env...),
		WorkingDir: WorkspaceDir,
		User:       fmt.Sprintf("%d:%d", cfg.UID, cfg.GID),
		Mounts:     mounts,
		Labels: cfg.ManagedLabels(map[string]string{
			LabelMailbox: strconv.FormatInt(req.MailboxID, 10),
			LabelRun:     strconv.FormatInt(req.RunID, 10),
			LabelPhase:   string(in.Phase),
			LabelAttempt: strconv.Itoa(req.Attempt),
		}),
		Limits:      cfg.Limits,
		HostNetwork: cfg.HostNetwork,
		Egress:      egressOf(cfg.Egress, agent),
	}
	return c, nil
}

// sessionStatePath is where the run's session directory is mounted: the adapter's
// SessionStatePath when the run has a session directory and the adapter has sessions, else "".
func sessionStatePath(agent Agent, sessionDir string) string {
	sa, ok := agent.(SessionAgent)
	if !ok || sessionDir == "" {
		return ""
	}
	return sa.Capabilities().SessionStatePath
}

// inputFiles returns the input directory's files: input.json (in, indented) and inv.Files.
func inputFiles(in phase.Input, inv Invocation) (map[string][]byte, error) {
	files := map[string][]byte{}
	for n, b := range inv.Files {
		if n == "input.json" || n == "" || n == "." || n == ".." || strings.ContainsAny(n, `/\`) {
			return nil, fmt.Errorf("invalid invocation file name %q", n)
		}
		files[n] = b
	}
	data, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode input: %w", err)
	}
	files["input.json"] = data
	return files, nil
}

// ContainerName returns the base name of a run: alfred-mbx<mailbox>-r<run>-<phase>-a<attempt>,
// the phase's "_" written "-" (alfred-mbx1-r4-ci-fix-a1), so the name is a DNS label (RFC
// 1123): a container's host name, and a Pod's name on Kubernetes, which refuses "_".
// Containers and run directories are named by CompileConfig.InstanceName of it.
func ContainerName(mailboxID, runID int64, p phase.Phase, attempt int) string {
	return fmt.Sprintf("alfred-mbx%d-r%d-%s-a%d", mailboxID, runID, strings.ReplaceAll(string(p), "_", "-"), attempt)
}

// WorktreeName returns the name of a mailbox's worktree, kept from one of its runs to the next
// (spec/worktrees.md): alfred-mbx<mailbox>-worktree.
func WorktreeName(mailboxID int64) string {
	return fmt.Sprintf("alfred-mbx%d-worktree", mailboxID)
}
