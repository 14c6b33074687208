package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
)

// TestKubePodDeadlineOutlastsTheStart: Kubernetes counts a Pod's activeDeadlineSeconds from the
// Pod's start, before the image's pull, the mounts and the egress gate, while the Executor
// counts runner.timeout from when the agent runs. The deadline adds the start's bound
// (runner.kubernetes.start_timeout, 10 minutes by default) and the stop grace, so that a slow
// start never cuts a run short, at 0 s and at the default start bound.
func TestKubePodDeadlineOutlastsTheStart(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Runner.Timeout = 30 * time.Minute
	require.Equal(t, 30*time.Minute+10*time.Minute+10*time.Second, kubeOptions(cfg).Timeout)
	cfg.Runner.Kubernetes.StartTimeout = 90 * time.Second
	require.Equal(t, 30*time.Minute+90*time.Second+10*time.Second, kubeOptions(cfg).Timeout)
}
