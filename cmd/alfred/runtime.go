package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/egress"
	"github.com/alfred-bot/alfred/runner/kubernetes"
)

// agentRuntime is the configured container runtime with what the rest of the wiring needs of
// it: the runtime itself, the live logs of the pages, and a close.
type agentRuntime struct {
	runner.Runtime
	logs  web.LiveLogs
	close func() error
}

// EgressRefused is the inner runtime's (runner.EgressReporter), nil when it enforces no egress
// itself.
func (r *agentRuntime) EgressRefused(id runner.ContainerID) []string {
	if er, ok := r.Runtime.(runner.EgressReporter); ok {
		return er.EgressRefused(id)
	}
	return nil
}

// newRuntime builds the runtime runner.runtime selects and checks that it answers: the Docker
// engine's ping, or the cluster's state claim read through the API (which also proves the
// credentials and the namespace).
func newRuntime(ctx context.Context, cfg *config.Config) (*agentRuntime, error) {
	if cfg.Runner.Runtime != config.RuntimeKubernetes {
		cli, err := docker.NewClient()
		if err != nil {
			return nil, err
		}
		if _, err := cli.Ping(ctx); err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("reach the Docker engine (is dockerd running? `make deps` starts it): %w", err)
		}
		rt := docker.New(cli)
		if cfg.Runner.EgressMode() == config.EgressAllowlist {
			// In a container (the compose file), the runs' proxies listen on Alfred's own
			// address in each run's network; on the host, on the network's gateway.
			rt.SelfContainer = cfg.Runner.Egress.SelfContainer
			if rt.SelfContainer == "" {
				if rt.SelfContainer, err = docker.FindSelf(ctx, cli); err != nil {
					_ = cli.Close()
					return nil, err
				}
			}
		}
		return &agentRuntime{Runtime: rt, logs: dockerLogs{cli}, close: cli.Close}, nil
	}
	k := cfg.Runner.Kubernetes
	cs, err := kubernetes.NewClientset(k.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(k.Namespace).Get(ctx, k.StateClaim, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("read the state claim %s in namespace %s (spec/kubernetes.md): %w", k.StateClaim, k.Namespace, err)
	}
	rt := kubernetes.New(cs, kubeOptions(cfg))
	rt.StartTimeout = k.StartTimeout
	return &agentRuntime{Runtime: rt, logs: runtimeLogs{rt}, close: func() error { return nil }}, nil
}

// kubeOptions is the Pod side of the configuration: the namespace, the state claim mounted
// at data_dir, the pull policy, the resource requests, the service account and the phase
// timeout as the Pod's deadline.
func kubeOptions(cfg *config.Config) kubernetes.Options {
	k := cfg.Runner.Kubernetes
	root, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		root = cfg.DataDir
	}
	// Validate decoded the placement and the requests already; an error here cannot happen.
	tolerations, affinity, _ := k.Placement()
	requests, _ := k.ResourceRequests()
	opts := kubernetes.Options{Namespace: k.Namespace, PullPolicy: corev1.PullPolicy(k.PullPolicy), Requests: requests,
		StateClaim: k.StateClaim, StateRoot: root, ServiceAccount: k.ServiceAccount,
		NodeSelector: k.NodeSelector, Tolerations: tolerations, Affinity: affinity,
		// The Executor stops a run at the timeout, counted from when its agent runs; the
		// deadline, a grace later, is the cluster's own bound should Alfred be gone by then.
		// Kubernetes counts it from the Pod's start, before the pull, the mounts and the egress
		// gate: the start's own bound is added, so that it never cuts a run short.
		Timeout: cfg.Runner.Timeout + cmp.Or(k.StartTimeout, kubernetes.DefaultStartTimeout) + runner.DefaultStopGrace}
	if cfg.Runner.EgressMode() == config.EgressAllowlist {
		opts.EgressGate = &kubernetes.EgressGate{Image: k.EgressGateImage, Target: k.EgressGateTarget}
	}
	return opts
}

// kubeEgressPolicy is the runs' NetworkPolicy as the configuration says it: this
// installation's run Pods (by their labels), allowed the operator's runner.egress.allow and
// every container agent's provider hosts (the union of the runs' allowlists: one policy holds
// all the runs), or anywhere with runner.egress.mode open.
func kubeEgressPolicy(cfg *config.Config, agents map[string]runner.Agent) kubernetes.EgressPolicy {
	instance := cfg.Runner.InstanceOf(cfg.DataDir)
	p := kubernetes.EgressPolicy{Name: kubernetes.EgressPolicyName(instance),
		Selector: map[string]string{runner.LabelManaged: "true", runner.LabelInstance: instance},
		Open:     cfg.Runner.EgressMode() != config.EgressAllowlist}
	seen := map[string]bool{}
	add := func(hosts []string) {
		for _, h := range hosts {
			if k := strings.ToLower(h); !seen[k] {
				seen[k] = true
				p.Allow = append(p.Allow, h)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		if _, api := agents[name].(runner.APIAgent); api {
			continue // runs in Alfred's own process, not in a Pod
		}
		if ea, ok := agents[name].(runner.EgressAgent); ok {
			add(ea.EgressHosts())
		}
	}
	add(cfg.Runner.Egress.Allow)
	return p
}

// applyEgressPolicy makes the cluster hold the runs' NetworkPolicy (kubeEgressPolicy) before
// any run starts, and logs the allowlist's entries by name, which it cannot hold.
func applyEgressPolicy(ctx context.Context, rt *kubernetes.Runtime, cfg *config.Config, agents map[string]runner.Agent, log *slog.Logger) error {
	p := kubeEgressPolicy(cfg, agents)
	names, err := rt.ApplyEgressPolicy(ctx, p)
	if err != nil {
		return err
	}
	if len(names) > 0 && !p.Open {
		log.Warn("egress allowlist entries by host name are not in the runs' NetworkPolicy, which holds addresses only: "+
			"add their addresses (IP:port) to runner.egress.allow", "policy", p.Name, "entries", strings.Join(names, ", "))
	}
	return nil
}

// egressPolicy is the runs' egress allowlist (runner.egress): nil when open; on Docker behind
// the run's proxy (its environment names it), on Kubernetes held by the runs' NetworkPolicy.
func egressPolicy(cfg *config.Config) *runner.EgressPolicy {
	if cfg.Runner.EgressMode() != config.EgressAllowlist {
		return nil
	}
	p := &runner.EgressPolicy{Allow: cfg.Runner.Egress.Allow}
	if cfg.Runner.Runtime != config.RuntimeKubernetes {
		p.ProxyURL = egress.ProxyURL
	}
	return p
}

// runtimeLogs is web.LiveLogs on a runner.Runtime whose container ids are the run names (the
// Kubernetes runtime: a run's Pod is named as the run).
type runtimeLogs struct{ rt runner.Runtime }

func (l runtimeLogs) RunLog(ctx context.Context, name string, maxBytes int) (string, error) {
	stdout, stderr, err := l.rt.Logs(ctx, runner.ContainerID(name))
	if errors.Is(err, runner.ErrContainerNotFound) {
		return "", fmt.Errorf("run %s: %w", name, web.ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	b := append(stdout, stderr...)
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	return string(b), nil
}
