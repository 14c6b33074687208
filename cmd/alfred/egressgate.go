package main

import (
	"context"

	"github.com/alfred-bot/alfred/runner/kubernetes/egressgate"
)

// egressGate is `alfred egress-gate [-target host:port] [-timeout 60s]`, the init container of a
// confined run's Pod on Kubernetes (runner/kubernetes.EgressGate, egressgate.Main): it returns
// once a connection to the target (off the runs' allowlist; the API server by default) fails,
// that is once the runs' NetworkPolicy filters the Pod, and fails at the bound otherwise. It
// reads no configuration.
func (a *app) egressGate(ctx context.Context, args []string) error {
	return egressgate.Main(ctx, args, a.stdout, a.stderr)
}
