package kubernetes_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
)

var update = flag.Bool("update", false, "rewrite golden files")

// runSpec is a run's spec as runner.Compile makes it (see runner/testdata).
func runSpec() runner.ContainerSpec {
	return runner.ContainerSpec{
		Name:       "alfred-mbx12-r34-development-a2",
		Image:      "alfred/script-agent:test",
		Cmd:        []string{"-script", "/alfred/in/script.yaml"},
		Env:        []string{"HOME=/alfred/home", "API_KEY=sk-test-not-a-secret"},
		WorkingDir: runner.WorkspaceDir,
		User:       "65532:65532",
		Mounts: []runner.Mount{
			{Source: "/data/worktrees/alfred-mbx12-worktree", Target: runner.WorkspaceDir},
			{Source: "/data/runs/alfred-mbx12-r34-development-a2/in", Target: runner.InputDir, ReadOnly: true},
			{Source: "/data/runs/alfred-mbx12-r34-development-a2/out", Target: runner.OutputDir},
		},
		Labels: map[string]string{
			runner.LabelManaged: "true", runner.LabelMailbox: "12", runner.LabelRun: "34",
			runner.LabelPhase: "development", runner.LabelAttempt: "2", runner.LabelInstance: "0123456789ab",
		},
		Limits: runner.Limits{MemoryBytes: 2 << 30, NanoCPUs: 2e9, PIDs: 512, Timeout: 30 * time.Minute},
	}
}

// TestPodForGolden: the compiled Pod and Secret of typical specs, against testdata/*.golden.json
// (go test -update rewrites them).
func TestPodForGolden(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		spec runner.ContainerSpec
		opts kubernetes.Options
	}{
		"development": {runSpec(), kubernetes.Options{Namespace: "alfred"}},
		"deadline_never_pull_host_network": {func() runner.ContainerSpec {
			s := runSpec()
			s.HostNetwork = true
			s.Env = nil
			s.Limits = runner.Limits{}
			return s
		}(), kubernetes.Options{Namespace: "alfred", PullPolicy: corev1.PullNever, Timeout: 90*time.Second + time.Millisecond, StopGrace: 1500 * time.Millisecond}},
		"state_claim_session": {func() runner.ContainerSpec {
			s := runSpec()
			s.Mounts = append(s.Mounts,
				runner.Mount{Source: "/data/runs/alfred-mbx12-r34-development-a2/home", Target: "/alfred/home/.claude"},
				runner.Mount{Source: "/data/sessions/12/", Target: "/alfred/home/.claude/projects/-workspace"})
			return s
		}(), kubernetes.Options{Namespace: "alfred", StateClaim: "alfred-state", StateRoot: "/data/", ServiceAccount: "alfred-agent"}},
		// runner.egress allowlist: the egress gate holds the agent until the policy filters the Pod.
		"egress_gate": {func() runner.ContainerSpec {
			s := runSpec()
			s.Egress = &runner.Egress{Allow: []string{"api.anthropic.com:443", "192.0.2.7:8080"}}
			return s
		}(), kubernetes.Options{Namespace: "alfred-runs", EgressGate: &kubernetes.EgressGate{Image: "registry.example.org/alfred:1.4",
			Target: "192.0.2.9:443", Timeout: 45 * time.Second}}},
		// runner.kubernetes placement: the one node that mounts a ReadWriteOnce state claim.
		"placement": {runSpec(), kubernetes.Options{Namespace: "alfred-runs",
			NodeSelector: map[string]string{"kubernetes.io/hostname": "node-a"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "alfred",
				Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "alfred.example/state", Operator: corev1.NodeSelectorOpExists}}}}}}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pod, secret, err := kubernetes.PodFor(tc.spec, tc.opts)
			require.NoError(t, err)
			got, err := json.MarshalIndent(struct {
				Pod    *corev1.Pod    `json:"pod"`
				Secret *corev1.Secret `json:"secret"`
			}{pod, secret}, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			golden := filepath.Join("testdata", "pod_"+name+".golden.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

// TestPodForEdges: the edges of the compile step, one clause per case.
func TestPodForEdges(t *testing.T) {
	t.Parallel()
	opts := kubernetes.Options{Namespace: "alfred"}

	t.Run("RootAndNamedUsersRefused", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{"", "0", "0:0", "0:65532", "root", "root:root", "alfred", "65532:staff", "-1"} {
			s := runSpec()
			s.User = u
			pod, secret, err := kubernetes.PodFor(s, opts)
			require.Error(t, err, "user %q", u)
			require.Nil(t, pod)
			require.Nil(t, secret)
		}
		s := runSpec()
		s.User = "1000"
		pod, _, err := kubernetes.PodFor(s, opts)
		require.NoError(t, err)
		sc := pod.Spec.Containers[0].SecurityContext
		require.Equal(t, int64(1000), *sc.RunAsUser)
		require.Nil(t, sc.RunAsGroup, "no gid: the image's")
		require.True(t, *sc.RunAsNonRoot)
	})

	t.Run("EmptyEnvNoSecret", func(t *testing.T) {
		t.Parallel()
		s := runSpec()
		s.Env = nil
		pod, secret, err := kubernetes.PodFor(s, opts)
		require.NoError(t, err)
		require.Nil(t, secret)
		require.Empty(t, pod.Spec.Containers[0].Env)
		require.Empty(t, pod.Spec.Containers[0].EnvFrom)
	})

	t.Run("EnvOnlyInTheSecret", func(t *testing.T) {
		t.Parallel()
		s := runSpec()
		s.Env = []string{"A=1", "TOKEN=hunter2-secret", "A=2", "EMPTY="}
		pod, secret, err := kubernetes.PodFor(s, opts)
		require.NoError(t, err)
		require.Equal(t, map[string][]byte{"A": []byte("2"), "TOKEN": []byte("hunter2-secret"), "EMPTY": {}}, secret.Data)
		require.Equal(t, s.Labels, secret.Labels)
		require.Equal(t, s.Name, secret.Name)
		b, err := json.Marshal(pod)
		require.NoError(t, err)
		require.NotContains(t, string(b), "hunter2")
		var names []string
		for _, e := range pod.Spec.Containers[0].Env {
			require.Empty(t, e.Value)
			require.Equal(t, s.Name, e.ValueFrom.SecretKeyRef.Name)
			require.Equal(t, e.Name, e.ValueFrom.SecretKeyRef.Key)
			names = append(names, e.Name)
		}
		require.Equal(t, []string{"A", "TOKEN", "EMPTY"}, names)

		for _, bad := range []string{"NOEQUALS-hunter2", "=value", "BAD KEY=x"} {
			s.Env = []string{bad}
			_, _, err := kubernetes.PodFor(s, opts)
			require.Error(t, err, bad)
			require.NotContains(t, err.Error(), "hunter2", "an entry's content is never in an error")
		}
	})

	t.Run("ReadOnlyMounts", func(t *testing.T) {
		t.Parallel()
		pod, _, err := kubernetes.PodFor(runSpec(), opts)
		require.NoError(t, err)
		byPath := map[string]corev1.VolumeMount{}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			byPath[m.MountPath] = m
		}
		require.False(t, byPath[runner.WorkspaceDir].ReadOnly)
		require.True(t, byPath[runner.InputDir].ReadOnly)
		require.False(t, byPath[runner.OutputDir].ReadOnly)
		require.False(t, byPath["/tmp"].ReadOnly)
		require.False(t, byPath[runner.HomeDir].ReadOnly)

		// A spec mount at HOME replaces the emptyDir (two mounts at one path are invalid).
		s := runSpec()
		s.Mounts = append(s.Mounts, runner.Mount{Source: "/data/home", Target: runner.HomeDir, ReadOnly: true})
		pod, _, err = kubernetes.PodFor(s, opts)
		require.NoError(t, err)
		var at []corev1.VolumeMount
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.MountPath == runner.HomeDir {
				at = append(at, m)
			}
		}
		require.Len(t, at, 1)
		require.True(t, at[0].ReadOnly)

		for _, bad := range [][]runner.Mount{
			{{Source: "rel", Target: "/x"}},
			{{Source: "/a", Target: "x"}},
			{{Source: "/a", Target: "/x"}, {Source: "/b", Target: "/x"}},
		} {
			s.Mounts = bad
			_, _, err := kubernetes.PodFor(s, opts)
			require.Error(t, err)
		}
	})

	t.Run("StateClaimSubPaths", func(t *testing.T) {
		t.Parallel()
		o := kubernetes.Options{Namespace: "alfred", StateClaim: "alfred-state", StateRoot: "/data"}
		pod, _, err := kubernetes.PodFor(runSpec(), o)
		require.NoError(t, err)
		sub := map[string]string{}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.Name == "state" {
				sub[m.MountPath] = m.SubPath
			}
		}
		require.Equal(t, map[string]string{
			runner.WorkspaceDir: "worktrees/alfred-mbx12-worktree",
			runner.InputDir:     "runs/alfred-mbx12-r34-development-a2/in",
			runner.OutputDir:    "runs/alfred-mbx12-r34-development-a2/out",
		}, sub)
		for _, v := range pod.Spec.Volumes {
			require.Nil(t, v.HostPath, "no host path with a state claim")
		}

		// A mount outside the root, the root itself, a sibling sharing its prefix, and a path
		// climbing out of it are refused: a Pod sees nothing of the claim but its run's paths.
		for _, src := range []string{"/etc", "/data", "/data/", "/database/x", "/data/../etc"} {
			s := runSpec()
			s.Mounts = []runner.Mount{{Source: src, Target: "/x"}}
			_, _, err := kubernetes.PodFor(s, o)
			require.Error(t, err, src)
		}
		o.StateRoot = "data"
		_, _, err = kubernetes.PodFor(runSpec(), o)
		require.Error(t, err, "a relative root")

		// No mounts: no claim either (a Pod that needs none of Alfred's state).
		s := runSpec()
		s.Mounts = nil
		pod, _, err = kubernetes.PodFor(s, kubernetes.Options{Namespace: "alfred", StateClaim: "alfred-state", StateRoot: "/data"})
		require.NoError(t, err)
		for _, v := range pod.Spec.Volumes {
			require.Nil(t, v.PersistentVolumeClaim)
		}
	})

	t.Run("LimitsZero", func(t *testing.T) {
		t.Parallel()
		s := runSpec()
		s.Limits = runner.Limits{}
		pod, _, err := kubernetes.PodFor(s, opts)
		require.NoError(t, err)
		require.Empty(t, pod.Spec.Containers[0].Resources.Limits)
		require.Empty(t, pod.Spec.Containers[0].Resources.Requests)
		require.Nil(t, pod.Spec.ActiveDeadlineSeconds, "Limits.Timeout is the Executor's; Options.Timeout sets the deadline")

		s.Limits = runner.Limits{NanoCPUs: 1_500_000_001, MemoryBytes: 128 << 20}
		o := opts
		o.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		pod, _, err = kubernetes.PodFor(s, o)
		require.NoError(t, err)
		r := pod.Spec.Containers[0].Resources
		require.Equal(t, "1501m", r.Limits.Cpu().String(), "rounded up to a millicore")
		require.Equal(t, "128Mi", r.Limits.Memory().String())
		require.Equal(t, "10m", r.Requests.Cpu().String())
		require.Equal(t, "128Mi", r.Requests.Memory().String(), "a resource Options.Requests does not name is requested at its limit")
	})

	t.Run("NamesAndLabelsKubernetesAccepts", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"", "Alfred-Upper", "alfred_underscore", strings.Repeat("a", 64)} {
			s := runSpec()
			s.Name = name
			_, _, err := kubernetes.PodFor(s, opts)
			require.Error(t, err, "name %q", name)
		}
		for k, v := range map[string]string{
			"alfred.ok":   "has space",
			"alfred.long": strings.Repeat("x", 64),
			"bad key!":    "true",
		} {
			s := runSpec()
			s.Labels = map[string]string{k: v}
			_, _, err := kubernetes.PodFor(s, opts)
			require.Error(t, err, "%s=%s", k, v)
		}
		s := runSpec()
		s.Image = ""
		_, _, err := kubernetes.PodFor(s, opts)
		require.Error(t, err)
	})

	t.Run("EgressNeedsTheGate", func(t *testing.T) {
		t.Parallel()
		s := runSpec()
		s.Egress = &runner.Egress{Allow: []string{"192.0.2.7:443"}}
		_, _, err := kubernetes.PodFor(s, opts)
		require.ErrorContains(t, err, "egress_gate_image")
		gated := opts
		gated.EgressGate = &kubernetes.EgressGate{Image: "alfred:1"}
		pod, _, err := kubernetes.PodFor(s, gated)
		require.NoError(t, err)
		require.Len(t, pod.Spec.InitContainers, 1)
		g := pod.Spec.InitContainers[0]
		require.Equal(t, kubernetes.GateContainerName, g.Name)
		require.Equal(t, []string{kubernetes.GateSubcommand, "-timeout", "1m0s"}, g.Args, "no target: the API server")
		require.Equal(t, pod.Spec.Containers[0].SecurityContext, g.SecurityContext, "hardened as the agent")
		// Without an allowlist (runner.egress.mode open) no gate, even when configured.
		pod, _, err = kubernetes.PodFor(runSpec(), gated)
		require.NoError(t, err)
		require.Empty(t, pod.Spec.InitContainers)
	})
}
