// Package docker implements runner.Runtime on the Docker Engine API (github.com/docker/docker
// client, negotiated API version; tested against Engine 20.10, API 1.41).
//
// Every container is created hardened: non-root user, all capabilities dropped,
// no-new-privileges, read-only root filesystem with tmpfs at /tmp and at runner.HomeDir, and the
// memory, CPU and PID limits of the spec. Images are never pulled: a missing image is an error
// wrapping runner.ErrImageNotFound.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/alfred-bot/alfred/runner"
)

// Defaults used when the corresponding Runtime field is zero.
const (
	// DefaultDestroyGrace is the SIGTERM→SIGKILL grace Destroy gives a running container.
	DefaultDestroyGrace = 5 * time.Second
	// DefaultCleanupTimeout bounds Destroy when it must run on a fresh context because the
	// caller's is already done.
	DefaultCleanupTimeout = 30 * time.Second
	// DefaultLogFileBytes is the size of each of the two json-file log files of a run
	// container (50 MB).
	DefaultLogFileBytes = 50 << 20
)

// tmpfsOptions are the mount options of the /tmp and HOME tmpfs: writable by any user
// (sticky), executable (agents run build and test binaries from $TMPDIR), no setuid, no devices.
const tmpfsOptions = "rw,exec,nosuid,nodev,mode=1777"

// Runtime is a runner.Runtime backed by a Docker daemon. The zero value is not usable; build it
// with New or NewFromEnv. It is safe for concurrent use.
type Runtime struct {
	cli *client.Client
	// DestroyGrace is the grace period Destroy gives a running container before SIGKILL
	// (DefaultDestroyGrace if zero).
	DestroyGrace time.Duration
	// CleanupTimeout bounds Destroy on a fresh context when the caller's ctx is done
	// (DefaultCleanupTimeout if zero).
	CleanupTimeout time.Duration
	// MaxLogBytes bounds what Logs keeps of each stream, head and tail (runner.MaxLogBytes if
	// zero).
	MaxLogBytes int
	// LogFileBytes is the size of each of the two json-file log files Docker keeps of a run
	// container (DefaultLogFileBytes if zero): what a runaway agent can fill on the daemon's
	// disk is twice this. Logs streams the output while the run goes on, so nothing of it is
	// lost to the rotation.
	LogFileBytes int64

	// OnEgressRefused, when set, is called for every request the egress proxy of a run refuses
	// (spec.Egress), with the run container's labels, the host:port asked for and whether it
	// is that destination's first refusal (egress.Options.OnRefused): cmd counts every one
	// (alfred_egress_refused_total) and logs each destination once.
	OnEgressRefused func(labels map[string]string, target string, first bool)
	// EgressDial connects the runs' proxies to allowed destinations (egress.Options.Dial; nil:
	// a plain dialer).
	EgressDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// EgressSubnets is the IPv4 range the runs' internal networks are cut from, a /28 each
	// (DefaultEgressSubnets if not valid).
	EgressSubnets netip.Prefix
	// SelfContainer is the container (name or id) Alfred itself runs in on this engine, ""
	// when Alfred runs on the Docker host (FindSelf finds it). With it, a run's proxy cannot
	// listen on the run network's gateway (an address of the host): Start connects this
	// container to the run's network at the network's second address (SelfAddress) and the
	// proxy listens there; Destroy and the sweep of leftover networks disconnect it.
	SelfContainer string

	stopped   sync.Map // ContainerID → struct{}: Stop was called, Wait reports Killed
	followers sync.Map // ContainerID → *runner.LogFollower: the logs streamed since Wait

	selfMu sync.Mutex
	selfID string // SelfContainer's full id, once inspected

	egressMu    sync.Mutex
	egressRuns  map[string]*egressRun         // container name → its network's proxy
	egressNames map[runner.ContainerID]string // container id → name, for runs with egress
}

var _ runner.Runtime = (*Runtime)(nil)

// New returns a Runtime using cli. The caller keeps ownership of cli (Close is not called).
func New(cli *client.Client) *Runtime {
	return &Runtime{cli: cli}
}

// NewClient returns a Docker client configured from the environment (DOCKER_HOST,
// DOCKER_API_VERSION, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY; default unix:///var/run/docker.sock)
// with API version negotiation.
func NewClient() (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("create docker client: %w", err)
	}
	return cli, nil
}

// NewFromEnv returns a Runtime on a client built by NewClient, and that client (to Close).
func NewFromEnv() (*Runtime, *client.Client, error) {
	cli, err := NewClient()
	if err != nil {
		return nil, nil, err
	}
	return New(cli), cli, nil
}

// Start creates and starts the container described by spec (see runner.Runtime.Start). It
// never removes or reuses a container it did not create.
//
// Errors: an invalid spec (no name or image, root or empty user, relative mount paths); a
// missing image (wraps runner.ErrImageNotFound); a name already held by any container, running
// or stopped, managed or not (wraps runner.ErrNameConflict; the holder is left alone); any
// daemon error. If the container was created but could not be started, that container (by the
// id the create returned) is removed before returning.
func (r *Runtime) Start(ctx context.Context, spec runner.ContainerSpec) (runner.Handle, error) {
	if err := validateSpec(spec); err != nil {
		return runner.Handle{}, err
	}
	if _, err := r.cli.ImageInspect(ctx, spec.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return runner.Handle{}, fmt.Errorf("start %s: %w: %q is not on the daemon (images are never pulled; build or load it first)", spec.Name, runner.ErrImageNotFound, spec.Image)
		}
		return runner.Handle{}, fmt.Errorf("start %s: inspect image %q: %w", spec.Name, spec.Image, err)
	}
	logFileBytes := r.LogFileBytes
	if logFileBytes <= 0 {
		logFileBytes = DefaultLogFileBytes
	}
	cfg, hostCfg := toDocker(spec, logFileBytes)
	if spec.Egress != nil {
		addr, err := r.startEgress(ctx, spec)
		if err != nil {
			return runner.Handle{}, err
		}
		withEgress(hostCfg, spec, addr)
	}

	resp, err := r.cli.ContainerCreate(ctx, cfg, hostCfg, nil, nil, spec.Name)
	if err != nil {
		if spec.Egress != nil {
			err = errors.Join(err, r.stopEgress(context.WithoutCancel(ctx), spec.Name))
		}
		if isConflict(err) {
			return runner.Handle{}, r.conflict(ctx, spec.Name)
		}
		if cerrdefs.IsNotFound(err) {
			return runner.Handle{}, fmt.Errorf("create container %s: %w: %w", spec.Name, runner.ErrImageNotFound, err)
		}
		return runner.Handle{}, fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	id := runner.ContainerID(resp.ID)
	if spec.Egress != nil {
		r.egressMu.Lock()
		if r.egressNames == nil {
			r.egressNames = map[runner.ContainerID]string{}
		}
		r.egressNames[id] = spec.Name
		r.egressMu.Unlock()
	}
	r.attach(ctx, id)
	if err := r.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return runner.Handle{}, errors.Join(fmt.Errorf("start container %s: %w", spec.Name, err), r.Destroy(ctx, id))
	}
	return runner.Handle{ID: id, Name: spec.Name, Origin: runner.OriginCreated, Labels: spec.Labels,
		Running: true, StartedAt: time.Now()}, nil
}

// conflict describes the container holding name, without touching it.
func (r *Runtime) conflict(ctx context.Context, name string) error {
	old, err := r.cli.ContainerInspect(ctx, name)
	if err != nil {
		return fmt.Errorf("create container %s: %w (holder not inspectable: %v)", name, runner.ErrNameConflict, err)
	}
	var labels map[string]string
	if old.Config != nil {
		labels = old.Config.Labels
	}
	state := "unknown"
	if old.State != nil {
		state = string(old.State.Status)
	}
	return fmt.Errorf("create container %s: %w (id %.12s, %s, %s=%q, %s=%q); not touching it",
		name, runner.ErrNameConflict, old.ID, state, runner.LabelManaged, labels[runner.LabelManaged],
		runner.LabelRun, labels[runner.LabelRun])
}

// Wait blocks until the container is not running and returns its exit code, whether the kernel
// OOM-killed it, and whether Stop was called for it (Killed). It returns ctx.Err() if ctx ends
// first, and an error if the container does not exist.
func (r *Runtime) Wait(ctx context.Context, id runner.ContainerID) (runner.ExitState, error) {
	r.follow(id) // unless Start's attach streams them: the logs from now on
	respC, errC := r.cli.ContainerWait(ctx, string(id), container.WaitConditionNotRunning)
	var st runner.ExitState
	select {
	case resp := <-respC:
		st.Code = int(resp.StatusCode)
		if resp.Error != nil {
			st.Error = resp.Error.Message
		}
	case err := <-errC:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return st, ctxErr
		}
		return st, fmt.Errorf("wait for container %.12s: %w", id, err)
	case <-ctx.Done():
		return st, ctx.Err()
	}
	if v, ok := r.followers.Load(id); ok {
		v.(*runner.LogFollower).MarkEnded()
	}
	if _, ok := r.stopped.Load(id); ok {
		st.Killed = true
	}
	info, err := r.cli.ContainerInspect(ctx, string(id))
	if err != nil {
		return st, fmt.Errorf("inspect container %.12s after exit: %w", id, err)
	}
	if info.State != nil {
		st.OOMKilled = info.State.OOMKilled
		if st.Error == "" {
			st.Error = info.State.Error
		}
	}
	return st, nil
}

// follow starts streaming id's logs (Follow) unless they are already streamed, so that
// json-file's rotation (Start's LogConfig), which drops the oldest part of a flood, cannot
// take the session id a CLI prints first; Destroy stops it.
func (r *Runtime) follow(id runner.ContainerID) {
	if _, ok := r.followers.Load(id); ok {
		return
	}
	f := runner.FollowLogs(func(ctx context.Context) (io.ReadCloser, error) {
		return r.cli.ContainerLogs(ctx, string(id), container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	}, demux, r.MaxLogBytes)
	if _, loaded := r.followers.LoadOrStore(id, f); loaded {
		f.Stop()
	}
}

// attach streams the created container's output from its first byte, before it starts, as
// `docker run` does: the json-file log that follow reads drops the oldest part of a flood at
// its rotation, so a stream opened after the start (Wait's follow, on a loaded machine once
// the flood has rotated the log) could miss the session id a CLI prints first. When the
// attach fails, Wait's follow is the stream. The attach carries no stdin: closing it (Destroy,
// or this process ending) leaves the container running.
func (r *Runtime) attach(ctx context.Context, id runner.ContainerID) {
	att, err := r.cli.ContainerAttach(ctx, string(id), container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return
	}
	f := runner.FollowLogs(func(ctx context.Context) (io.ReadCloser, error) {
		stop := context.AfterFunc(ctx, att.Close)
		return attachedStream{Reader: att.Reader, close: func() error { stop(); att.Close(); return nil }}, nil
	}, demux, r.MaxLogBytes)
	if _, loaded := r.followers.LoadOrStore(id, f); loaded {
		f.Stop()
	}
}

// attachedStream is an attach's multiplexed output as an io.ReadCloser.
type attachedStream struct {
	io.Reader
	close func() error
}

// Close closes the attach.
func (a attachedStream) Close() error { return a.close() }

// unfollow stops and forgets id's log stream (Destroy).
func (r *Runtime) unfollow(id runner.ContainerID) {
	if v, ok := r.followers.LoadAndDelete(id); ok {
		v.(*runner.LogFollower).Stop()
	}
}

func demux(stdout, stderr io.Writer, rc io.Reader) error {
	_, err := stdcopy.StdCopy(stdout, stderr, rc)
	return err
}

// Logs returns what the container wrote to stdout and stderr, demultiplexed (stdcopy), each
// stream kept in a runner.LogBuffer: beyond runner.MaxLogBytes its head and tail around a
// marker (runner.LogDropped), so a flood of output costs neither memory nor the session id a
// CLI prints first. The logs are read now; once Wait has seen the container end, the head of
// what Wait's stream followed replaces the head of a read that dropped some (runner.JoinLogs). The container must not use a TTY (Start never allocates one).
func (r *Runtime) Logs(ctx context.Context, id runner.ContainerID) (stdout, stderr []byte, err error) {
	var headOut, headErr *runner.LogBuffer
	if v, ok := r.followers.Load(id); ok {
		o, e, ok, err := v.(*runner.LogFollower).Logs(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("read logs of container %.12s: %w", id, err)
		}
		if ok {
			headOut, headErr = o, e
		}
	}
	rc, err := r.cli.ContainerLogs(ctx, string(id), container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, nil, fmt.Errorf("read logs of container %.12s: %w", id, err)
	}
	defer rc.Close()
	out, errOut := runner.NewLogBuffer(r.MaxLogBytes), runner.NewLogBuffer(r.MaxLogBytes)
	if err := demux(out, errOut, rc); err != nil {
		return out.Bytes(), errOut.Bytes(), fmt.Errorf("demultiplex logs of container %.12s: %w", id, err)
	}
	if headOut != nil {
		return runner.JoinLogs(headOut, out), runner.JoinLogs(headErr, errOut), nil
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// Stop sends SIGTERM, waits up to grace (rounded up to whole seconds, the daemon's unit), then
// SIGKILL, and returns when the container is stopped. ctx must outlive grace. A container that
// is already stopped or gone is not an error. Later Waits report Killed.
func (r *Runtime) Stop(ctx context.Context, id runner.ContainerID, grace time.Duration) error {
	r.stopped.Store(id, struct{}{})
	secs := int((grace + time.Second - 1) / time.Second)
	err := r.cli.ContainerStop(ctx, string(id), container.StopOptions{Signal: "SIGTERM", Timeout: &secs})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %.12s: %w", id, err)
	}
	return nil
}

// Destroy stops (DestroyGrace) and force-removes the container with its anonymous volumes. A
// container that does not exist is not an error, so Destroy is idempotent. If ctx is already
// done, Destroy works on a fresh context bounded by CleanupTimeout. Failures of both steps are
// joined.
func (r *Runtime) Destroy(ctx context.Context, id runner.ContainerID) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), orDefault(r.CleanupTimeout, DefaultCleanupTimeout))
		defer cancel()
	}
	defer r.stopped.Delete(id)
	defer r.unfollow(id)
	var errs []error
	// The run's network (runner/docker egress) is named as the container: known from Start or
	// Adopt, else read before the container goes.
	r.egressMu.Lock()
	netName, known := r.egressNames[id]
	delete(r.egressNames, id)
	r.egressMu.Unlock()
	if !known {
		if info, err := r.cli.ContainerInspect(ctx, string(id)); err == nil && info.HostConfig != nil &&
			info.HostConfig.NetworkMode.IsUserDefined() && string(info.HostConfig.NetworkMode) == strings.TrimPrefix(info.Name, "/") {
			netName = string(info.HostConfig.NetworkMode)
		}
	}
	secs := int(orDefault(r.DestroyGrace, DefaultDestroyGrace) / time.Second)
	if err := r.cli.ContainerStop(ctx, string(id), container.StopOptions{Signal: "SIGTERM", Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("stop container %.12s: %w", id, err))
	}
	if err := r.cli.ContainerRemove(ctx, string(id), container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		errs = append(errs, fmt.Errorf("remove container %.12s: %w", id, err))
	}
	if netName != "" {
		errs = append(errs, r.stopEgress(ctx, netName))
	}
	return errors.Join(errs...)
}

// List returns all containers (running or not) carrying every given label with the given value.
// Names are returned without Docker's leading "/".
func (r *Runtime) List(ctx context.Context, labels map[string]string) ([]runner.Container, error) {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]runner.Container, 0, len(list))
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, runner.Container{
			ID:      runner.ContainerID(c.ID),
			Name:    name,
			Labels:  c.Labels,
			Running: c.State == container.StateRunning,
		})
	}
	return out, nil
}

// validateSpec refuses specs Start must not run.
func validateSpec(spec runner.ContainerSpec) error {
	if spec.Name == "" {
		return errors.New("container spec: name is required")
	}
	if spec.Image == "" {
		return fmt.Errorf("container spec %s: image is required", spec.Name)
	}
	if err := checkUser(spec.User); err != nil {
		return fmt.Errorf("container spec %s: %w", spec.Name, err)
	}
	if spec.HostNetwork && spec.Egress != nil {
		return fmt.Errorf("container spec %s: the host network is outside the egress allowlist", spec.Name)
	}
	for _, m := range spec.Mounts {
		if !strings.HasPrefix(m.Source, "/") || !strings.HasPrefix(m.Target, "/") {
			return fmt.Errorf("container spec %s: mount %s→%s: paths must be absolute", spec.Name, m.Source, m.Target)
		}
	}
	return nil
}

// checkUser accepts "uid" or "uid:gid" (numeric or names) except root in any spelling.
func checkUser(user string) error {
	u, _, _ := strings.Cut(user, ":")
	if u == "" {
		return errors.New("user is required (uid:gid, never root)")
	}
	if u == "root" {
		return errors.New("refusing to run as root")
	}
	if n, err := strconv.ParseInt(u, 10, 64); err == nil && n == 0 {
		return errors.New("refusing to run as uid 0")
	}
	return nil
}

// toDocker translates a ContainerSpec into the Docker create configuration, with json-file
// logs rotated at logFileBytes, two files kept.
func toDocker(spec runner.ContainerSpec, logFileBytes int64) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:      spec.Image,
		Cmd:        spec.Cmd,
		Env:        spec.Env,
		WorkingDir: spec.WorkingDir,
		User:       spec.User,
		Labels:     spec.Labels,
		Tty:        false,
		OpenStdin:  false,
	}
	pids := spec.Limits.PIDs
	hc := &container.HostConfig{
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			"/tmp":         tmpfsOptions,
			runner.HomeDir: tmpfsOptions,
		},
		Resources: container.Resources{
			Memory:   spec.Limits.MemoryBytes,
			NanoCPUs: spec.Limits.NanoCPUs,
		},
		// json-file can be read back by Logs; rotation bounds the disk a runaway agent can fill
		// (Logs reads across the rotated files).
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": strconv.FormatInt(logFileBytes, 10), "max-file": "2"}},
	}
	if pids > 0 {
		hc.Resources.PidsLimit = &pids
	}
	if spec.Limits.MemoryBytes > 0 {
		hc.Resources.MemorySwap = spec.Limits.MemoryBytes // no swap on top of the limit
	}
	if spec.HostNetwork {
		hc.NetworkMode = "host"
	}
	for _, m := range spec.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type:        mount.TypeBind,
			Source:      m.Source,
			Target:      m.Target,
			ReadOnly:    m.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	return cfg, hc
}

func isConflict(err error) bool {
	return cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "is already in use")
}

func isRemovalInProgress(err error) bool {
	return strings.Contains(err.Error(), "is already in progress")
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
