package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/alfred-bot/alfred/runner"
)

// Defaults used when the corresponding Runtime field is zero.
const (
	// DefaultDestroyGrace is the grace period Destroy gives a running Pod's deletion.
	DefaultDestroyGrace = 5 * time.Second
	// DefaultCleanupTimeout bounds Destroy when it must run on a fresh context because the
	// caller's is already done.
	DefaultCleanupTimeout = 30 * time.Second
	// DefaultStartTimeout bounds how long Start waits for the container to run: the Pod's
	// scheduling (a node an autoscaler adds takes minutes), the image's pull and the egress
	// gate's wait.
	DefaultStartTimeout = 10 * time.Minute
	// DefaultOrphanSecretAge is how old a run's Secret without its Pod must be before
	// SweepLeftovers removes it: Start creates the Pod right after the Secret, so a younger
	// one may be another replica's Start in progress.
	DefaultOrphanSecretAge = time.Minute
)

// imageReasons are the waiting reasons of a container whose image cannot be had: with no
// registry, a missing image. A pull's failure (ErrImagePull, ImagePullBackOff) counts only
// when the registry said the image is not there or not for us (imageAbsent); any other one
// (429, a timeout, a refused connection) the kubelet tries again, within the start's bound.
var imageReasons = map[string]bool{
	"ErrImageNeverPull": true,
	"ErrImagePull":      true,
	"ImagePullBackOff":  true,
	"InvalidImageName":  true,
}

// imageAbsent are the words of a registry's answer that no retry changes (containerd's and
// the registries' messages for a missing repository, tag or manifest, or a denied pull).
var imageAbsent = []string{"not found", "manifest unknown", "does not exist", "pull access denied", "unauthorized", "denied"}

// pullWaits reports whether w is a pull failure the kubelet may get past by trying again.
func pullWaits(w *corev1.ContainerStateWaiting) bool {
	if w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff" {
		return false
	}
	msg := strings.ToLower(w.Message)
	for _, a := range imageAbsent {
		if strings.Contains(msg, a) {
			return false
		}
	}
	return true
}

// Runtime is a runner.Runtime backed by a Kubernetes cluster: one Pod (and, when the spec has
// an environment, one Secret) per run, in Options.Namespace. A run's runner.ContainerID is its
// Pod's name, which is unique in the namespace. The zero value is not usable; build it with
// New. It is safe for concurrent use.
type Runtime struct {
	cs   kubernetes.Interface
	opts Options
	// DestroyGrace is the grace period of Destroy's deletion (DefaultDestroyGrace if zero).
	DestroyGrace time.Duration
	// CleanupTimeout bounds Destroy on a fresh context when the caller's ctx is done
	// (DefaultCleanupTimeout if zero).
	CleanupTimeout time.Duration
	// StartTimeout bounds Start's wait for the container to run (DefaultStartTimeout if zero).
	StartTimeout time.Duration
	// MaxLogBytes bounds what Logs keeps of the log, head and tail (runner.MaxLogBytes if
	// zero).
	MaxLogBytes int
	// OrphanSecretAge is the age from which SweepLeftovers removes a run's Secret whose Pod is
	// gone (DefaultOrphanSecretAge if zero, none if negative: every such Secret).
	OrphanSecretAge time.Duration

	stopped   sync.Map // ContainerID → struct{}: Stop was called, Wait reports Killed
	followers sync.Map // ContainerID → *runner.LogFollower: the log streamed since Start or Wait
}

var (
	_ runner.Runtime         = (*Runtime)(nil)
	_ runner.LeftoverSweeper = (*Runtime)(nil)
)

// New returns a Runtime creating its Pods with cs, compiled with opts (opts.Namespace must be
// set).
func New(cs kubernetes.Interface, opts Options) *Runtime {
	return &Runtime{cs: cs, opts: opts}
}

// Client-side rate limits of NewClientset's clientset: API requests per second, and the burst
// above it. client-go's defaults (5 and 10) suit a controller; a run makes about ten requests
// (Secret, Pod, owner, watches, logs, deletes), so a few runs in a row, or two at once, emptied
// the burst and every later request waited 200 ms for its turn, on the path of every phase.
const (
	ClientQPS   = 50
	ClientBurst = 100
)

// NewClientset returns a clientset for the cluster of the kubeconfig file at path (the
// in-cluster configuration when path is empty), limited to ClientQPS requests a second with
// bursts of ClientBurst.
func NewClientset(path string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = ClientQPS, ClientBurst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create kubernetes client: %w", err)
	}
	return cs, nil
}

func (r *Runtime) pods() typedcorev1.PodInterface { return r.cs.CoreV1().Pods(r.opts.Namespace) }

// Start creates the Secret (when spec has an environment), then the Pod, makes the Pod the
// Secret's owner, waits until the container runs or has already ended (see
// runner.Runtime.Start), and starts following its log (see follow). It never removes or
// reuses an object it did not create.
//
// Errors: a spec PodFor refuses; a Pod or Secret of the same name already in the namespace
// (wraps runner.ErrNameConflict; the holder is left alone); an image the node cannot have
// (wraps runner.ErrImageNotFound); a container that does not run within StartTimeout (with the
// last reason the kubelet gave); an egress gate that found the Pod unfiltered (wraps
// ErrEgressOpen, with the gate's message); any API error. On every error after a create, what this call created
// (by uid) is removed before returning.
func (r *Runtime) Start(ctx context.Context, spec runner.ContainerSpec) (runner.Handle, error) {
	pod, secret, err := PodFor(spec, r.opts)
	if err != nil {
		return runner.Handle{}, err
	}
	var created []metav1.Object
	undo := func(err error) error {
		cctx, cancel := r.cleanupCtx(ctx)
		defer cancel()
		errs := []error{err}
		for i := len(created) - 1; i >= 0; i-- {
			errs = append(errs, r.deleteOwn(cctx, created[i]))
		}
		return errors.Join(errs...)
	}
	if secret != nil {
		s, err := r.cs.CoreV1().Secrets(r.opts.Namespace).Create(ctx, secret, metav1.CreateOptions{})
		if err != nil {
			if apierrors.IsAlreadyExists(err) {
				return runner.Handle{}, r.conflict(ctx, spec.Name, "secret")
			}
			return runner.Handle{}, fmt.Errorf("create secret %s: %w", spec.Name, err)
		}
		secret = s
		created = append(created, s)
	}
	p, err := r.pods().Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return runner.Handle{}, undo(r.conflict(ctx, spec.Name, "pod"))
		}
		return runner.Handle{}, undo(fmt.Errorf("create pod %s: %w", spec.Name, err))
	}
	created = append(created, p)
	if secret != nil {
		secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}}
		if _, err := r.cs.CoreV1().Secrets(r.opts.Namespace).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			return runner.Handle{}, undo(fmt.Errorf("make pod %s the owner of its secret: %w", spec.Name, err))
		}
	}
	sctx, cancel := context.WithTimeout(ctx, orDefault(r.StartTimeout, DefaultStartTimeout))
	defer cancel()
	var started time.Time
	var waiting string // the last reason the Pod gave for its container not running yet
	err = r.watchPod(sctx, p.Name, func(p *corev1.Pod) (bool, error) {
		cs := RunContainerStatus(p)
		if w := waitingReason(p, cs); w != "" {
			waiting = w
		}
		switch {
		case cs != nil && cs.State.Running != nil:
			started = cs.State.Running.StartedAt.Time
			return true, nil
		case cs != nil && cs.State.Terminated != nil:
			started = cs.State.Terminated.StartedAt.Time
			return true, nil
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			if msg, failed := gateFailed(p); failed {
				return true, fmt.Errorf("pod %s: %w: the egress gate (init container %s) failed, the agent never ran: %s",
					p.Name, ErrEgressOpen, GateContainerName, msg)
			}
			return true, fmt.Errorf("pod %s ended before its container ran: %s %s", p.Name, p.Status.Reason, p.Status.Message)
		}
		return false, notStarting(p)
	})
	if err != nil {
		if ctx.Err() == nil && sctx.Err() != nil {
			err = fmt.Errorf("pod %s: container not running after %s, runner.kubernetes.start_timeout (last: %s)",
				spec.Name, orDefault(r.StartTimeout, DefaultStartTimeout), cmp.Or(waiting, "no container status"))
		}
		return runner.Handle{}, undo(fmt.Errorf("start %s: %w", spec.Name, err))
	}
	if started.IsZero() {
		started = time.Now()
	}
	r.follow(runner.ContainerID(p.Name)) // as soon as it runs, not when the caller gets to Wait
	return runner.Handle{ID: runner.ContainerID(p.Name), Name: p.Name, Origin: runner.OriginCreated,
		Labels: spec.Labels, Running: true, StartedAt: started}, nil
}

// waitingReason is why p's run container cs (nil before the kubelet reports it) does not run
// yet, "" when the Pod gives no reason: the container's waiting reason and message, or, while
// no node takes the Pod, the scheduler's ("Unschedulable: 0/1 nodes are available: 1
// Insufficient cpu.").
func waitingReason(p *corev1.Pod, cs *corev1.ContainerStatus) string {
	if cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
		return cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// notStarting returns the error of a container whose image cannot be had (wraps
// runner.ErrImageNotFound), nil otherwise. Other reasons a container waits for
// (CreateContainerError and the like) can pass, and the kubelet retries them: Start waits for
// them up to StartTimeout and reports the last one, Wait until its ctx ends.
func notStarting(p *corev1.Pod) error {
	cs := RunContainerStatus(p)
	if gs := gateContainerStatus(p); gs != nil && gs.State.Waiting != nil && imageReasons[gs.State.Waiting.Reason] {
		cs = gs // the egress gate's image (runner.kubernetes.egress_gate_image)
	}
	if cs == nil || cs.State.Waiting == nil || !imageReasons[cs.State.Waiting.Reason] || pullWaits(cs.State.Waiting) {
		return nil
	}
	w := cs.State.Waiting
	return fmt.Errorf("%w: %q: %s: %s (no image is pulled from a registry it cannot reach; import it into the cluster first)",
		runner.ErrImageNotFound, cs.Image, w.Reason, w.Message)
}

// conflict describes the holder of name (the Pod if there is one, else the Secret), without
// touching it.
func (r *Runtime) conflict(ctx context.Context, name, what string) error {
	var meta metav1.ObjectMeta
	if p, err := r.pods().Get(ctx, name, metav1.GetOptions{}); err == nil {
		meta, what = p.ObjectMeta, fmt.Sprintf("pod, %s", p.Status.Phase)
	} else if s, err := r.cs.CoreV1().Secrets(r.opts.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		meta = s.ObjectMeta
	} else {
		return fmt.Errorf("create %s %s: %w (holder not readable: %v)", what, name, runner.ErrNameConflict, err)
	}
	return fmt.Errorf("create %s: %w (%s, uid %s, %s=%q, %s=%q); not touching it", name, runner.ErrNameConflict,
		what, meta.UID, runner.LabelManaged, meta.Labels[runner.LabelManaged], runner.LabelRun, meta.Labels[runner.LabelRun])
}

// deleteOwn deletes obj (a Pod or Secret this process created) at once, only if its uid is
// still the one created.
func (r *Runtime) deleteOwn(ctx context.Context, obj metav1.Object) error {
	uid := obj.GetUID()
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &uid}}
	var err error
	switch obj.(type) {
	case *corev1.Secret:
		err = r.cs.CoreV1().Secrets(r.opts.Namespace).Delete(ctx, obj.GetName(), opts)
	default:
		err = r.pods().Delete(ctx, obj.GetName(), opts)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove %T %s created by this start: %w", obj, obj.GetName(), err)
	}
	return nil
}

// Wait blocks until the run's container has ended and returns its exit code, whether it was
// OOM-killed (its reason), and whether it was killed on Alfred's behalf (Stop called through
// this Runtime, or the Pod's deadline: Stop uses it, and so does Options.Timeout). It returns
// ctx.Err() if ctx ends first.
//
// Errors: no such Pod (wraps runner.ErrContainerNotFound); a container whose image the node
// cannot have (wraps runner.ErrImageNotFound). A Pod that ended without its container ever
// running is an ExitState with Code -1 and the Pod's reason in Error.
func (r *Runtime) Wait(ctx context.Context, id runner.ContainerID) (runner.ExitState, error) {
	var st runner.ExitState
	err := r.watchPod(ctx, string(id), func(p *corev1.Pod) (bool, error) {
		cs := RunContainerStatus(p)
		if cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
			r.follow(id) // the log from now on, whatever the kubelet rotates away later
		}
		if cs != nil && cs.State.Terminated != nil {
			if v, ok := r.followers.Load(id); ok {
				v.(*runner.LogFollower).MarkEnded()
			}
			t := cs.State.Terminated
			st.Code = int(t.ExitCode)
			st.OOMKilled = t.Reason == "OOMKilled"
			st.Killed = p.Status.Reason == "DeadlineExceeded"
			st.Disrupted = disruption(p)
			return true, nil
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			if v, ok := r.followers.Load(id); ok {
				v.(*runner.LogFollower).MarkEnded()
			}
			st = runner.ExitState{Code: -1, Killed: p.Status.Reason == "DeadlineExceeded",
				Error: fmt.Sprintf("pod ended before its container ran: %s %s", p.Status.Reason, p.Status.Message)}
			if msg, failed := gateFailed(p); failed {
				st.Error = fmt.Sprintf("pod ended before its container ran: the egress gate failed: %s", msg)
			}
			return true, nil
		}
		return false, notStarting(p)
	})
	if err != nil {
		if ctx.Err() != nil {
			return runner.ExitState{}, ctx.Err()
		}
		return runner.ExitState{}, fmt.Errorf("wait for pod %s: %w", id, err)
	}
	if _, ok := r.stopped.Load(id); ok {
		st.Killed = true
	}
	return st, nil
}

// Stop ends the container and returns once it has ended. Kubernetes stops a container only by
// ending its Pod; deleting the Pod would lose its logs and exit code, so Stop lowers the Pod's
// activeDeadlineSeconds to 1 instead: the kubelet sends SIGTERM, waits the Pod's
// terminationGracePeriodSeconds, then SIGKILL, and keeps the Pod (phase Failed, reason
// DeadlineExceeded) for Wait and Logs. Kubernetes fixes that grace when the Pod is created
// (Options.StopGrace); grace is not used. A container that has already ended, or a Pod that is
// gone, is not an error. Later Waits report Killed.
func (r *Runtime) Stop(ctx context.Context, id runner.ContainerID, _ time.Duration) error {
	r.stopped.Store(id, struct{}{})
	p, err := r.pods().Get(ctx, string(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop pod %s: %w", id, err)
	}
	if ended(p) {
		return nil
	}
	patch := []byte(`{"spec":{"activeDeadlineSeconds":1}}`)
	if _, err := r.pods().Patch(ctx, string(id), types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("stop pod %s: set its deadline: %w", id, err)
	}
	err = r.watchPod(ctx, string(id), func(p *corev1.Pod) (bool, error) { return ended(p), nil })
	if err != nil && !errors.Is(err, runner.ErrContainerNotFound) {
		return fmt.Errorf("stop pod %s: wait for its end: %w", id, err)
	}
	return nil
}

// ended reports whether the Pod's container has terminated or the Pod is over.
func ended(p *corev1.Pod) bool {
	cs := RunContainerStatus(p)
	return (cs != nil && cs.State.Terminated != nil) ||
		p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// Destroy deletes the Pod and its Secret and returns once the Pod is gone. A Pod whose
// container still runs gets the grace DestroyGrace; one whose container has ended is deleted
// at once (grace 0): nothing is left to stop, and a graceful deletion would wait for the
// kubelet to confirm it (about 2 s on the test cluster, on the path of every phase). Objects
// that do not exist are not an error, so Destroy is idempotent. If ctx is already done,
// Destroy works on a fresh context bounded by CleanupTimeout; the wait for the Pod to go is
// bounded by CleanupTimeout in any case. Failures of the steps are joined.
func (r *Runtime) Destroy(ctx context.Context, id runner.ContainerID) error {
	ctx, cancel := r.cleanupCtx(ctx)
	defer cancel()
	defer r.stopped.Delete(id)
	defer r.unfollow(id)
	grace := int64(orDefault(r.DestroyGrace, DefaultDestroyGrace) / time.Second)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
	if p, err := r.pods().Get(ctx, string(id), metav1.GetOptions{}); err == nil && ended(p) {
		// Only this Pod (its uid): should a newer Pod hold the name by then, the delete fails
		// instead of cutting that one's grace.
		opts = metav1.DeleteOptions{GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &p.UID}}
	}
	var errs []error
	podErr := r.pods().Delete(ctx, string(id), opts)
	if podErr != nil && !apierrors.IsNotFound(podErr) {
		errs = append(errs, fmt.Errorf("delete pod %s: %w", id, podErr))
	}
	if err := r.cs.CoreV1().Secrets(r.opts.Namespace).Delete(ctx, string(id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete secret %s: %w", id, err))
	}
	if podErr == nil {
		// Bounded: a Pod on a node that is gone stays Terminating until someone forces it.
		wctx, wcancel := context.WithTimeout(ctx, orDefault(r.CleanupTimeout, DefaultCleanupTimeout))
		defer wcancel()
		err := r.watchPod(wctx, string(id), func(*corev1.Pod) (bool, error) { return false, nil })
		if !errors.Is(err, runner.ErrContainerNotFound) {
			errs = append(errs, fmt.Errorf("wait for pod %s to go: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// List returns the runs' Pods carrying every given label with the given value. Running is true
// for a Pod whose container has not ended (pending or running).
func (r *Runtime) List(ctx context.Context, want map[string]string) ([]runner.Container, error) {
	list, err := r.pods().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(want).String()})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := make([]runner.Container, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		out = append(out, runner.Container{ID: runner.ContainerID(p.Name), Name: p.Name, Labels: p.Labels,
			Running: p.DeletionTimestamp == nil && !ended(p)})
	}
	return out, nil
}

// Adopt finds the run's Pod by name (a run's ContainerID is its Pod's name) and returns a
// Handle with Origin runner.OriginAdopted (see runner.Runtime.Adopt). It creates, starts and
// removes nothing.
//
// Errors: no such Pod (wraps runner.ErrContainerNotFound); a Pod without
// runner.LabelManaged=true (wraps runner.ErrNotManaged); any API error.
func (r *Runtime) Adopt(ctx context.Context, ref string) (runner.Handle, error) {
	if ref == "" {
		return runner.Handle{}, fmt.Errorf("adopt: %w: empty name", runner.ErrContainerNotFound)
	}
	p, err := r.pods().Get(ctx, ref, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
			return runner.Handle{}, fmt.Errorf("adopt %s: %w", ref, runner.ErrContainerNotFound)
		}
		return runner.Handle{}, fmt.Errorf("adopt %s: get pod: %w", ref, err)
	}
	if p.Labels[runner.LabelManaged] != "true" {
		return runner.Handle{}, fmt.Errorf("adopt %s: %w (pod uid %s)", ref, runner.ErrNotManaged, p.UID)
	}
	h := runner.Handle{ID: runner.ContainerID(p.Name), Name: p.Name, Origin: runner.OriginAdopted,
		Labels: p.Labels, Running: p.DeletionTimestamp == nil && !ended(p)}
	if cs := RunContainerStatus(p); cs != nil {
		switch {
		case cs.State.Running != nil:
			h.StartedAt = cs.State.Running.StartedAt.Time
		case cs.State.Terminated != nil:
			h.StartedAt = cs.State.Terminated.StartedAt.Time
		}
	}
	return h, nil
}

// watchPod calls done with the Pod named name now and at every change, until done returns
// true or an error, ctx ends (ctx.Err()), or the Pod is gone (an error wrapping
// runner.ErrContainerNotFound). A watch the server closes is opened again from a fresh read.
// A transient failure of the API server (transientAPIError: a restart, an upgrade, 429 or
// 5xx) is tried again, waiting longer each time up to watchRetryMax, until ctx ends: a blip
// never ends a run that goes on in its Pod.
func (r *Runtime) watchPod(ctx context.Context, name string, done func(*corev1.Pod) (bool, error)) error {
	pods := r.pods()
	wait := watchRetryMin
	retry := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transientAPIError(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, watchRetryMax)
		return nil
	}
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && ctx.Err() == nil {
				return fmt.Errorf("pod %s: %w", name, runner.ErrContainerNotFound)
			}
			if err := retry(err); err != nil {
				return err
			}
			continue
		}
		if ok, err := done(p); ok || err != nil {
			return err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: p.ResourceVersion,
		})
		if err != nil {
			if err := retry(err); err != nil {
				return fmt.Errorf("watch pod %s: %w", name, err)
			}
			continue
		}
		wait = watchRetryMin
		ok, err := watchEvents(ctx, w, name, done)
		w.Stop()
		if ok || err != nil {
			return err
		}
	}
}

// watchEvents feeds w's Pods to done until it is finished (true), the watch closes (false),
// or ctx ends.
func watchEvents(ctx context.Context, w watch.Interface, name string, done func(*corev1.Pod) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case ev, open := <-w.ResultChan():
			if !open {
				return false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return true, fmt.Errorf("pod %s: %w", name, runner.ErrContainerNotFound)
			case watch.Error:
				return false, nil // e.g. resource version too old: read again
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ok, err := done(p); ok || err != nil {
				return true, err
			}
		}
	}
}

// RunContainerStatus returns the status of the run's container (ContainerName) in p, nil
// before the kubelet reports it.
func RunContainerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == ContainerName {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// gateContainerStatus returns the status of the egress gate (GateContainerName), nil when the
// Pod has none or before the kubelet reports it.
func gateContainerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == GateContainerName {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// gateFailed reports whether the Pod's egress gate ended with a non-zero exit, and its
// termination message (the tail of its output: TerminationMessageFallbackToLogsOnError).
func gateFailed(p *corev1.Pod) (string, bool) {
	gs := gateContainerStatus(p)
	if gs == nil || gs.State.Terminated == nil || gs.State.Terminated.ExitCode == 0 {
		return "", false
	}
	t := gs.State.Terminated
	return fmt.Sprintf("exit %d: %s", t.ExitCode, cmp.Or(strings.TrimSpace(t.Message), t.Reason)), true
}

// cleanupCtx returns ctx while it is live, else a fresh context bounded by CleanupTimeout.
func (r *Runtime) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), orDefault(r.CleanupTimeout, DefaultCleanupTimeout))
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// SweepLeftovers removes the runs' Secrets carrying every label of want whose Pod (of the same
// name) is gone and that are at least OrphanSecretAge old: what is left when Alfred stopped
// between the Secret's creation and the Pod's (a Secret whose Pod was deleted later goes with
// it: the Pod owns it). A Secret whose Pod exists is kept. The delete is conditional on the
// Secret's uid, so one created again under the name in between stays. It returns the names
// removed; failures are joined.
func (r *Runtime) SweepLeftovers(ctx context.Context, want map[string]string) ([]string, error) {
	secrets := r.cs.CoreV1().Secrets(r.opts.Namespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(want).String()})
	if err != nil {
		return nil, fmt.Errorf("sweep secrets: list: %w", err)
	}
	age := orDefault(r.OrphanSecretAge, DefaultOrphanSecretAge)
	var removed []string
	var errs []error
	for i := range list.Items {
		s := &list.Items[i]
		if r.OrphanSecretAge >= 0 && time.Since(s.CreationTimestamp.Time) < age {
			continue
		}
		_, err := r.pods().Get(ctx, s.Name, metav1.GetOptions{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sweep secret %s: get its pod: %w", s.Name, err))
			continue
		}
		uid := s.UID
		err = secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			removed = append(removed, s.Name)
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			errs = append(errs, fmt.Errorf("sweep secret %s: %w", s.Name, err))
		}
	}
	return removed, errors.Join(errs...)
}

// The waits between tries of a transient API failure while watching a Pod (watchPod).
const (
	watchRetryMin = 200 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// transientAPIError reports whether err may pass by trying again: anything but the API
// server's considered refusals (not found, forbidden, unauthorized, bad request, invalid,
// method not supported, gone), such as 429, 5xx, a timeout or no answer at all (a restart).
func transientAPIError(err error) bool {
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err),
		apierrors.IsBadRequest(err), apierrors.IsInvalid(err), apierrors.IsMethodNotSupported(err),
		apierrors.IsGone(err):
		return false
	}
	return true
}

// disruption returns why the cluster ended the Pod, "" when it did not: a node-pressure
// eviction (the Pod's reason Evicted), or a drain, a preemption or a taint (the
// DisruptionTarget condition Kubernetes sets, with its reason and message).
func disruption(p *corev1.Pod) string {
	if p.Status.Reason == "Evicted" {
		return strings.TrimSpace("evicted: " + p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return strings.TrimSuffix(strings.TrimSpace(c.Reason+": "+c.Message), ":")
		}
	}
	return ""
}
