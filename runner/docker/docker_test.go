package docker_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

func TestConformance(t *testing.T) {
	cli := runtimetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	image := runtimetest.BuildImage(t, ctx, cli, fmt.Sprintf("alfred-test/probe:docker-%d", os.Getpid()), runtimetest.ProbePackage)
	runtimetest.RunRuntimeConformance(t, docker.New(cli), image)
}

func TestStartRefusesInvalidSpec(t *testing.T) {
	t.Parallel()
	rt := docker.New(nil) // validation happens before any daemon call
	for name, spec := range map[string]runner.ContainerSpec{
		"no name":        {Image: "x", User: "1:1"},
		"no image":       {Name: "n", User: "1:1"},
		"root user":      {Name: "n", Image: "x", User: "root"},
		"uid 0":          {Name: "n", Image: "x", User: "0:1000"},
		"no user":        {Name: "n", Image: "x"},
		"relative mount": {Name: "n", Image: "x", User: "1:1", Mounts: []runner.Mount{{Source: "rel", Target: "/w"}}},
	} {
		_, err := rt.Start(t.Context(), spec)
		require.Error(t, err, name)
	}
}
