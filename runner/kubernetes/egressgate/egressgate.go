// Package egressgate is the egress gate of a confined run's Pod on Kubernetes
// (runner/kubernetes.EgressGate, spec/kubernetes.md "Egress"): the init container that holds the
// agent's container until the runs' NetworkPolicy filters the Pod. It imports nothing but the
// standard library, so the gate's binary stays small: `alfred egress-gate` runs Main, and so
// does any image whose entrypoint passes its arguments on.
package egressgate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Subcommand is the gate's first argument in the Pod ("egress-gate -target host:port -timeout
// 60s": the image's entrypoint is alfred, as deploy/Dockerfile builds it).
const Subcommand = "egress-gate"

// DefaultTimeout bounds the gate's wait when no timeout is given: well under the runtime's
// start timeout, so that an unfiltered Pod fails with the gate's reason, not Start's.
const DefaultTimeout = 60 * time.Second

// ErrOpen is returned by WaitFiltered when the target still answered at the bound.
var ErrOpen = errors.New("egress not filtered")

// Gate timing: how long one connection attempt may take, the pause between attempts, and how
// many failures in a row mean "filtered" (one failure could be the target's own hiccup).
const (
	gateDialTimeout = time.Second
	gateInterval    = 100 * time.Millisecond
	gateFailures    = 2
)

// WaitFiltered dials target (host:port; empty: the API server of KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT) until gateFailures attempts in a row fail, which means the Pod's
// egress is filtered, and returns how many connections succeeded before. The gate of
// runner/kubernetes.EgressGate.
//
// Errors: no target; the bound timeout passed without gateFailures failures in a row (wraps
// ErrOpen, with the count: the NetworkPolicy is not enforced on this Pod, or the target
// is on the allowlist); ctx ended.
func WaitFiltered(ctx context.Context, target string, timeout time.Duration) (int, error) {
	if target == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return 0, errors.New("egress gate: no target, and no KUBERNETES_SERVICE_HOST/PORT in the environment")
		}
		target = net.JoinHostPort(host, port)
	}
	if _, p, err := net.SplitHostPort(target); err != nil || p == "" {
		return 0, fmt.Errorf("egress gate: target %q: want host:port", target)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// Each attempt has its own timeout, never cut by the bound: an attempt the bound
	// interrupted would count as a failure, and the gate would pass open (fail closed instead).
	bound := time.Now().Add(timeout)
	connected, failed := 0, 0
	var d net.Dialer
	for time.Now().Before(bound) {
		dctx, cancel := context.WithTimeout(ctx, gateDialTimeout)
		c, err := d.DialContext(dctx, "tcp", target)
		cancel()
		if ctx.Err() != nil {
			if c != nil {
				c.Close()
			}
			return connected, fmt.Errorf("egress gate: %w", ctx.Err())
		}
		if err != nil {
			if failed++; failed >= gateFailures {
				return connected, nil
			}
			continue
		}
		c.Close()
		connected++
		failed = 0
		select {
		case <-ctx.Done():
		case <-time.After(gateInterval):
		}
	}
	return connected, fmt.Errorf("egress gate: %w after %s: %d connections to %s (off the runs' allowlist) succeeded and no two attempts in a row failed: "+
		"the runs' NetworkPolicy is not enforced on this Pod (does the cluster's network plugin implement NetworkPolicy? "+
		"is Alfred's policy alfred-runs-egress-* in the namespace?), or the target is on the allowlist; the run does not start",
		ErrOpen, timeout, connected, target)
}

// Main is the gate's command line after Subcommand: -target host:port (default: the cluster's
// API server, KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT) and -timeout (DefaultTimeout).
// It returns nil once the Pod's egress is filtered, saying so on stdout; errors: bad flags, and
// WaitFiltered's.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(Subcommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "", "host:port off the runs' allowlist (default: the cluster's API server, KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT)")
	timeout := fs.Duration("timeout", DefaultTimeout, "how long to wait for the Pod's egress to be filtered")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", Subcommand, fs.Args())
	}
	connected, err := WaitFiltered(ctx, *target, *timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "alfred egress-gate: egress filtered (%d connections succeeded before)\n", connected)
	return nil
}
