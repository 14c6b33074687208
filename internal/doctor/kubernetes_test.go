package doctor_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/doctor"
)

// cluster is a doctor.Cluster answering from fixed facts.
type cluster struct {
	denied map[string]bool // "verb resource" the credentials may not do
	claim  doctor.ClaimStatus
	images map[string]bool // images the nodes can have
	broken map[string]bool // images whose command exits 1
	pods   []string        // images RunPod ran, in order
	open   bool            // the namespace does not enforce Pod Security restricted
}

func (c *cluster) Version(context.Context) (string, error) { return "v1.34.4", nil }
func (c *cluster) Allowed(_ context.Context, resource, verb string) (bool, error) {
	return !c.denied[verb+" "+resource], nil
}
func (c *cluster) Claim(context.Context) (doctor.ClaimStatus, error) { return c.claim, nil }
func (c *cluster) RunPod(_ context.Context, image string, _ []string) (doctor.PodRun, error) {
	c.pods = append(c.pods, image)
	if !c.images[image] {
		return doctor.PodRun{}, fmt.Errorf("%w: ErrImageNeverPull", doctor.ErrImageMissing)
	}
	if c.broken[image] {
		return doctor.PodRun{Exit: 1, Took: 2 * time.Second}, nil
	}
	return doctor.PodRun{Exit: 0, Took: 2 * time.Second}, nil
}

func (c *cluster) EnforcesRestricted(context.Context) (bool, error) { return !c.open, nil }

func kubeConfig(c *cluster) doctor.Config {
	return doctor.Config{ConfigFile: "alfred.yaml", PublicURL: public,
		Kubernetes: &doctor.Kubernetes{Namespace: "alfred", StateClaim: "alfred-state", Cluster: c,
			Permissions: []doctor.Permission{{Resource: "pods", Verbs: []string{"create", "patch"}, Why: "runs"},
				{Resource: "pods/log", Verbs: []string{"get"}, Why: "logs"}}},
		Agents: []doctor.Agent{{Name: "script", Adapter: "script", Image: "alfred/script-agent:dev", Phases: []string{"default"}},
			{Name: "spare", Adapter: "script", Image: "alfred/spare:1"}}}
}

// TestKubernetesChecks: on runner.runtime kubernetes the doctor checks the cluster instead of
// the Docker engine, names each missing verb, and judges the claim and the images.
func TestKubernetesChecks(t *testing.T) {
	bound := doctor.ClaimStatus{Exists: true, Phase: "Bound", AccessModes: []string{"ReadWriteMany"}}
	for _, tc := range []struct {
		name    string
		cluster cluster
		want    []string
		fails   bool
	}{
		{"all green", cluster{claim: bound, images: map[string]bool{"alfred/script-agent:dev": true, "alfred/spare:1": true}},
			[]string{"[ok]   kubernetes: API: Kubernetes v1.34.4 answers; namespace alfred",
				"[ok]   kubernetes: RBAC pods: create, patch allowed",
				"[ok]   kubernetes: RBAC pods/log: get allowed",
				"[ok]   kubernetes: state claim alfred-state: Bound, ReadWriteMany",
				"[ok]   kubernetes: Pod Security: namespace alfred enforces restricted",
				"[ok]   agent script: image: alfred/script-agent:dev present or pullable: a Pod of it (its default command) ran to completion in namespace alfred (exit 0, 2s)"},
			false},
		{"not restricted", cluster{claim: bound, open: true, images: map[string]bool{"alfred/script-agent:dev": true, "alfred/spare:1": true}},
			[]string{"[FAIL] kubernetes: Pod Security: namespace alfred does not enforce the restricted profile: a privileged Pod would be admitted",
				"fix: label it: kubectl label namespace alfred pod-security.kubernetes.io/enforce=restricted"},
			true},
		{"a verb missing", cluster{claim: bound, denied: map[string]bool{"patch pods": true}, images: map[string]bool{"alfred/script-agent:dev": true}},
			[]string{"[FAIL] kubernetes: RBAC pods: missing verb patch on pods in namespace alfred (needed: create, patch; runs)",
				"fix: grant them to Alfred's service account in the runs' namespace: the Role alfred-runtime of deploy/kubernetes/runs-role.yaml",
				"[skip] agent script: image: not checked: permissions are missing (above)"},
			true},
		{"claim pending", cluster{claim: doctor.ClaimStatus{Exists: true, Phase: "Pending", AccessModes: []string{"ReadWriteMany"}, StorageClass: "standard"},
			images: map[string]bool{"alfred/script-agent:dev": true, "alfred/spare:1": true}},
			[]string{`[FAIL] kubernetes: state claim alfred-state: Pending, not Bound (storage class "standard", access modes ReadWriteMany)`},
			true},
		{"claim missing", cluster{images: map[string]bool{"alfred/script-agent:dev": true, "alfred/spare:1": true}},
			[]string{"[FAIL] kubernetes: state claim alfred-state: no such claim in namespace alfred"},
			true},
		{"claim ReadWriteOnce", cluster{claim: doctor.ClaimStatus{Exists: true, Phase: "Bound", AccessModes: []string{"ReadWriteOnce"}},
			images: map[string]bool{"alfred/script-agent:dev": true, "alfred/spare:1": true}},
			[]string{"[warn] kubernetes: state claim alfred-state: Bound, but ReadWriteOnce: Alfred and every run's Pod must then be on one node"},
			false},
		{"image whose command fails", cluster{claim: bound, images: map[string]bool{"alfred/script-agent:dev": true, "alfred/spare:1": true},
			broken: map[string]bool{"alfred/script-agent:dev": true}},
			[]string{"[FAIL] agent script: image: a Pod of alfred/script-agent:dev (its default command) ran in namespace alfred but exited 1: the image does not run the script agent"},
			true},
		{"images missing", cluster{claim: bound},
			[]string{"[FAIL] agent script: image: alfred/script-agent:dev cannot be had on the cluster: image missing on the cluster: ErrImageNeverPull",
				"[warn] agent spare: image: alfred/spare:1 cannot be had on the cluster"},
			true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cluster
			rep := doctor.Run(context.Background(), kubeConfig(&c))
			var b bytes.Buffer
			require.NoError(t, rep.Write(&b))
			for _, w := range tc.want {
				require.Contains(t, b.String(), w)
			}
			require.NotContains(t, b.String(), "docker", "no Docker check on Kubernetes")
			require.Equal(t, tc.fails, rep.Blocking(), "%s", b.String())
		})
	}
}

// TestKubernetesEgressNames: the allowlist's entries by host name, which the runs'
// NetworkPolicy cannot hold, are a warning naming each; an allowlist of addresses is ok; with
// the egress open nothing is said.
func TestKubernetesEgressNames(t *testing.T) {
	bound := doctor.ClaimStatus{Exists: true, Phase: "Bound", AccessModes: []string{"ReadWriteMany"}}
	c := cluster{claim: bound, images: map[string]bool{"alfred/script-agent:dev": true, "alfred/spare:1": true}}
	for _, tc := range []struct {
		policy string
		names  []string
		want   string
	}{
		{"alfred-runs-egress-0123", []string{"api.anthropic.com:443", "*.npmjs.org:443"},
			"[warn] kubernetes: egress: NetworkPolicy alfred-runs-egress-0123 holds addresses only; not in it, so unreachable from the runs: api.anthropic.com:443, *.npmjs.org:443"},
		{"alfred-runs-egress-0123", nil,
			"[ok]   kubernetes: egress: every allowlist entry is an address: NetworkPolicy alfred-runs-egress-0123 holds them all"},
		{"", nil, ""},
	} {
		cfg := kubeConfig(&c)
		cfg.Kubernetes.EgressPolicy, cfg.Kubernetes.EgressNames = tc.policy, tc.names
		rep := doctor.Run(context.Background(), cfg)
		var b bytes.Buffer
		require.NoError(t, rep.Write(&b))
		if tc.want == "" {
			require.NotContains(t, b.String(), "kubernetes: egress")
			continue
		}
		require.Contains(t, b.String(), tc.want)
		require.False(t, rep.Blocking(), "a warning, not a failure: %s", b.String())
	}
}
