package main

import (
	"context"
	"fmt"

	"github.com/alfred-bot/alfred/runner/kubernetes"
)

// egressGate is `alfred egress-gate [-target host:port] [-timeout 60s]`, the init container of a
// confined run's Pod on Kubernetes (runner/kubernetes.EgressGate): it returns once a
// connection to the target (off the runs' allowlist; the API server by default) fails, that
// is once the runs' NetworkPolicy filters the Pod, and fails at the bound otherwise. It reads
// no configuration.
func (a *app) egressGate(ctx context.Context, args []string) error {
	fs := a.flagSet(kubernetes.GateSubcommand, "[-target host:port] [-timeout 60s]")
	target := fs.String("target", "", "host:port off the runs' allowlist (default: the cluster's API server, KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT)")
	timeout := fs.Duration("timeout", kubernetes.DefaultGateTimeout, "how long to wait for the Pod's egress to be filtered")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	connected, err := kubernetes.WaitFiltered(ctx, *target, *timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "alfred egress-gate: egress filtered (%d connections succeeded before)\n", connected)
	return nil
}
