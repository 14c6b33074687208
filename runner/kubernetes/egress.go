package kubernetes

import (
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NetworkPolicyFor compiles a runs' egress allowlist (runner.Egress.Allow, "host:port" pairs)
// into the NetworkPolicy that holds it on Kubernetes: named name in namespace, selecting the
// Pods carrying every label of selector, with no ingress at all and as egress DNS to the
// cluster's DNS Pods (kube-system's k8s-app: kube-dns, UDP and TCP 53) and, for each entry whose
// host is an IP address, that address (a /32 or /128 ipBlock) on its TCP port, nothing else.
//
// A NetworkPolicy holds addresses, not names: entries whose host is a name ("api.example:443",
// "*.example:443") cannot be compiled and are returned in names, in their order, for the
// operator to list by address (deploy/kubernetes/networkpolicy.yaml says how). It is pure.
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
