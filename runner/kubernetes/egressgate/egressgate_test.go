package egressgate_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/kubernetes/egressgate"
)

// TestWaitFiltered: the gate returns once connections to its target fail (here a loopback
// listener that is closed while the gate dials it: what a NetworkPolicy arriving does), with
// the connections that succeeded before; at the bound, with the target still answering, it
// fails with ErrOpen and says so (an attempt the bound would cut is never counted as a
// failure: under load that passed the gate open); a cancelled context is an error too.
func TestWaitFiltered(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	target := ln.Addr().String()
	done := make(chan error, 1)
	var connected int
	go func() {
		var err error
		connected, err = egressgate.WaitFiltered(t.Context(), target, time.Minute)
		done <- err
	}()
	<-accepted // the gate reached the open target: it must still be waiting
	select {
	case err := <-done:
		t.Fatalf("the gate returned while the target answered: %v", err)
	default:
	}
	require.NoError(t, ln.Close()) // "filtered": refused from now on
	require.NoError(t, <-done)
	require.Positive(t, connected)

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
	n, err := egressgate.WaitFiltered(t.Context(), open.Addr().String(), 500*time.Millisecond)
	require.ErrorIs(t, err, egressgate.ErrOpen)
	require.ErrorContains(t, err, "the run does not start")
	require.Positive(t, n)

	// Ended by its caller: an error, never a pass.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = egressgate.WaitFiltered(ctx, open.Addr().String(), time.Minute)
	require.ErrorIs(t, err, context.Canceled)

	_, err = egressgate.WaitFiltered(t.Context(), "no-port", time.Second)
	require.ErrorContains(t, err, "want host:port")
}
