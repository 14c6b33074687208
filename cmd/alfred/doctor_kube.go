package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
)

// doctorPodTimeout bounds the wait for one doctor Pod's container to end once it runs.
const doctorPodTimeout = 2 * time.Minute

// kubeDoctor returns the doctor's view of the cluster of runner.kubernetes and the runtime
// that runs its Pods (nil when no client could be built: every check then fails with why).
func kubeDoctor(cfg *config.Config, agents map[string]runner.Agent) (*doctor.Kubernetes, *kubernetes.Runtime) {
	k := cfg.Runner.Kubernetes
	dk := &doctor.Kubernetes{Namespace: k.Namespace, StateClaim: k.StateClaim}
	for _, p := range kubernetes.Access {
		res := p.Resource
		if p.Group != "" {
			res += "." + p.Group
		}
		dk.Permissions = append(dk.Permissions, doctor.Permission{Resource: res, Verbs: p.Verbs, Why: p.Why})
	}
	if ep := kubeEgressPolicy(cfg, agents); !ep.Open {
		dk.EgressPolicy = ep.Name
		// Validate checked every entry: only names come back.
		_, dk.EgressNames, _ = kubernetes.NetworkPolicyFor(ep.Name, k.Namespace, ep.Selector, ep.Allow)
	}
	cs, err := kubernetes.NewClientset(k.Kubeconfig)
	if err != nil {
		dk.Cluster = brokenCluster{err}
		return dk, nil
	}
	rt := kubernetes.New(cs, kubeOptions(cfg))
	dk.Cluster = kubeCluster{cs: cs, ns: k.Namespace, claim: k.StateClaim, rt: rt,
		user:     strconv.Itoa(cfg.Runner.UID) + ":" + strconv.Itoa(cfg.Runner.GID),
		instance: cfg.Runner.InstanceOf(cfg.DataDir)}
	return dk, rt
}

// kubeCluster is doctor.Cluster on client-go, in the runtime's namespace.
type kubeCluster struct {
	cs        k8s.Interface
	ns, claim string
	rt        *kubernetes.Runtime
	user      string // uid:gid of the runs
	instance  string // runner.LabelInstance of this installation's Pods
}

func (c kubeCluster) Version(context.Context) (string, error) {
	v, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

func (c kubeCluster) Allowed(ctx context.Context, resource, verb string) (bool, error) {
	res, sub, _ := strings.Cut(resource, "/")
	res, group, _ := strings.Cut(res, ".") // "networkpolicies.networking.k8s.io"
	r, err := c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
		Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
			Namespace: c.ns, Verb: verb, Group: group, Resource: res, Subresource: sub}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

func (c kubeCluster) Claim(ctx context.Context) (doctor.ClaimStatus, error) {
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(c.ns).Get(ctx, c.claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return doctor.ClaimStatus{}, nil
	}
	if err != nil {
		return doctor.ClaimStatus{}, err
	}
	st := doctor.ClaimStatus{Exists: true, Phase: string(pvc.Status.Phase)}
	modes := pvc.Status.AccessModes // the bound volume's
	if len(modes) == 0 {
		modes = pvc.Spec.AccessModes
	}
	for _, m := range modes {
		st.AccessModes = append(st.AccessModes, string(m))
	}
	if pvc.Spec.StorageClassName != nil {
		st.StorageClass = *pvc.Spec.StorageClassName
	}
	return st, nil
}

// RunPod runs the image as a run's Pod would (the runtime's PodFor: the runs' user, hardened,
// the pull policy and service account of runner.kubernetes), without mounts or environment.
func (c kubeCluster) RunPod(ctx context.Context, image string, args []string) (doctor.PodRun, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	spec := runner.ContainerSpec{Name: "alfred-doctor-" + hex.EncodeToString(b), Image: image, Cmd: args,
		WorkingDir: "/", User: c.user,
		Labels: map[string]string{runner.LabelManaged: "true", runner.LabelInstance: c.instance, runner.LabelPhase: runner.DoctorPhase},
		Limits: runner.Limits{MemoryBytes: 256 << 20, NanoCPUs: 5e8}}
	began := time.Now()
	h, err := c.rt.Start(ctx, spec)
	if errors.Is(err, runner.ErrImageNotFound) {
		return doctor.PodRun{}, fmt.Errorf("%w: %v", doctor.ErrImageMissing, err)
	}
	if err != nil {
		return doctor.PodRun{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.rt.Destroy(cctx, h.ID)
	}()
	wctx, cancel := context.WithTimeout(ctx, doctorPodTimeout)
	defer cancel()
	exit, err := c.rt.Wait(wctx, h.ID)
	if err != nil {
		return doctor.PodRun{}, fmt.Errorf("pod %s: %w", h.ID, err)
	}
	if exit.Error != "" {
		return doctor.PodRun{}, fmt.Errorf("pod %s: %s", h.ID, exit.Error)
	}
	return doctor.PodRun{Exit: exit.Code, Took: time.Since(began)}, nil
}

// EnforcesRestricted creates a Pod on the host network as a server-side dry run: Pod Security
// admission refuses it where the namespace enforces restricted; nothing is created either way.
func (c kubeCluster) EnforcesRestricted(ctx context.Context) (bool, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alfred-doctor-pod-security", Namespace: c.ns},
		Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "probe", Image: "alfred-doctor-probe:none"}}}}
	_, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "PodSecurity"):
		return true, nil
	}
	return false, err
}

// brokenCluster answers every check with the error that kept the client from being built.
type brokenCluster struct{ err error }

func (b brokenCluster) Version(context.Context) (string, error)               { return "", b.err }
func (b brokenCluster) Allowed(context.Context, string, string) (bool, error) { return false, b.err }
func (b brokenCluster) Claim(context.Context) (doctor.ClaimStatus, error) {
	return doctor.ClaimStatus{}, b.err
}
func (b brokenCluster) RunPod(context.Context, string, []string) (doctor.PodRun, error) {
	return doctor.PodRun{}, b.err
}
func (b brokenCluster) EnforcesRestricted(context.Context) (bool, error) { return false, b.err }
