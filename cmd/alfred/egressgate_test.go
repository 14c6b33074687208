package main

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEgressGateCommand: `alfred egress-gate` (a run Pod's init container on Kubernetes) exits
// 0 once its target refuses (here a loopback port nothing listens on any more) and 1 with the
// reason when the target still answers at the bound; it reads no configuration.
func TestEgressGateCommand(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"egress-gate", "-target", closed, "-timeout", "10s"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "egress filtered")

	open, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { open.Close() })
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"egress-gate", "-target", open.Addr().String(), "-timeout", "300ms"}, &out, &errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut.String(), "egress not filtered")
	require.Contains(t, errOut.String(), "the run does not start")
}
