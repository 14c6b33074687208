package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/alfred-bot/alfred/runner"
)

// NetworkPolicyFor compiles a runs' egress allowlist (runner.Egress.Allow, "host:port" pairs)
// into the NetworkPolicy that holds it on Kubernetes: named name in namespace, selecting the
// Pods carrying every label of selector, with no ingress at all and as egress DNS to the
// cluster's DNS Pods (kube-system's k8s-app: kube-dns, UDP and TCP 53) and, for each entry whose
// host is an IP address, that address (a /32 or /128 ipBlock) on its TCP port, nothing else.
//
// A NetworkPolicy holds addresses, not names: entries whose host is a name ("api.example:443",
// "*.example:443") cannot be compiled and are returned in names, in their order, for the
// operator to list by address (`alfred doctor` names them). It is pure.
//
// Errors: an entry that is not host:port, or whose port is not 1–65535.
func NetworkPolicyFor(name, namespace string, selector map[string]string, allow []string) (*networkingv1.NetworkPolicy, []string, error) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	dns := intstr.FromInt32(53)
	egress := []networkingv1.NetworkPolicyEgressRule{{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
	}}
	var names []string
	var errs []error
	seen := map[string]bool{}
	for _, e := range allow {
		host, port, err := net.SplitHostPort(strings.TrimSpace(e))
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 1 || n > 65535 || host == "" {
			errs = append(errs, fmt.Errorf("egress allowlist entry %q: want host:port with a port 1–65535", e))
			continue
		}
		addr, err := netip.ParseAddr(host)
		if err != nil {
			names = append(names, e)
			continue
		}
		prefix := netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()).String()
		if seen[prefix+"/"+port] {
			continue
		}
		seen[prefix+"/"+port] = true
		p := intstr.FromInt32(int32(n))
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: prefix}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
		})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: maps.Clone(selector)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      slices.Clip(egress),
		},
	}, names, nil
}

// EgressPolicy is the runs' egress as Runtime.ApplyEgressPolicy keeps it in the cluster: one
// NetworkPolicy for the installation's run Pods.
type EgressPolicy struct {
	// Name is the NetworkPolicy's name (EgressPolicyName).
	Name string
	// Selector are the labels every Pod it holds carries: the installation's run Pods
	// (runner.LabelManaged, runner.LabelInstance).
	Selector map[string]string
	// Allow is the allowlist (host:port pairs, NetworkPolicyFor), read when Open is false.
	Allow []string
	// Open lets the Pods connect anywhere (runner.egress.mode: open): the policy allows all
	// egress, so that the namespace's baseline (deploy/kubernetes/networkpolicy.yaml: DNS
	// only) does not hold them. NetworkPolicies add up: a connection one allows is allowed.
	Open bool
}

// EgressPolicyName is the name of the runs' egress NetworkPolicy of the installation whose
// runner.LabelInstance is instance: "alfred-runs-egress-<instance>", apart from the static
// baseline of deploy/kubernetes ("alfred-runs-egress"), so that two installations sharing a
// namespace each keep their own.
func EgressPolicyName(instance string) string {
	return "alfred-runs-egress-" + instance
}

// openNetworkPolicy is the NetworkPolicy of p.Open: no ingress, every egress.
func openNetworkPolicy(name, namespace string, selector map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: maps.Clone(selector)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{}}, // one rule with no peer: anywhere
		},
	}
}

// ApplyEgressPolicy makes the NetworkPolicy p.Name of the Runtime's namespace hold p: created
// when missing, its spec replaced otherwise (a concurrent writer, another replica starting,
// is retried on conflict). Alfred calls it at start-up, before any run, so that every run's
// Pod is selected from its creation. It returns the allowlist's entries whose host is a name
// (NetworkPolicyFor: a NetworkPolicy holds addresses only), which the policy does not allow.
//
// Errors: an entry NetworkPolicyFor refuses; any API error (the Role lacks networkpolicies
// get, create or update: Access).
func (r *Runtime) ApplyEgressPolicy(ctx context.Context, p EgressPolicy) ([]string, error) {
	want := openNetworkPolicy(p.Name, r.opts.Namespace, p.Selector)
	var names []string
	if !p.Open {
		var err error
		want, names, err = NetworkPolicyFor(p.Name, r.opts.Namespace, p.Selector, p.Allow)
		if err != nil {
			return nil, err
		}
	}
	want.Labels = map[string]string{runner.LabelManaged: "true"}
	api := r.cs.NetworkingV1().NetworkPolicies(r.opts.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := api.Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = api.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) { // created meanwhile: update it on the next try
				return apierrors.NewConflict(networkingv1.Resource("networkpolicies"), p.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		got.Labels = want.Labels
		got.Spec = want.Spec
		_, err = api.Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("apply the runs' egress NetworkPolicy %s in namespace %s: %w", p.Name, r.opts.Namespace, err)
	}
	return names, nil
}
