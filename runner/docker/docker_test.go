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

// The head of a container's output survives json-file's rotation however late Wait comes: a
// container that prints a first line, floods its log past both rotated files and exits before
// Wait is called still has its first line in Logs (Start streams the output from before the
// container starts; a stream opened by Wait would begin after the rotation).
func TestLogsKeepTheHeadWhenWaitComesAfterTheRotation(t *testing.T) {
	t.Parallel()
	cli := runtimetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	image := runtimetest.BuildImage(t, ctx, cli, fmt.Sprintf("alfred-test/probe:docker-head-%d", os.Getpid()), runtimetest.ProbePackage)
	rt := docker.New(cli)
	rt.LogFileBytes, rt.MaxLogBytes = 64<<10, 32<<10
	h, err := rt.Start(ctx, runner.ContainerSpec{Name: fmt.Sprintf("alfred-test-head-%d", os.Getpid()), Image: image,
		User: runtimetest.ImageUser, Cmd: []string{"flood", "session: first-line", fmt.Sprint(1 << 20)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Destroy(context.Background(), h.ID) })
	require.Eventually(t, func() bool { // exited: the flood has rotated the log (16 times the file size)
		info, err := cli.ContainerInspect(ctx, string(h.ID))
		return err == nil && info.State != nil && info.State.Status == "exited"
	}, 2*time.Minute, 20*time.Millisecond, "the flood never ended")
	st, err := rt.Wait(ctx, h.ID)
	require.NoError(t, err)
	require.Equal(t, 0, st.Code)
	out, _, err := rt.Logs(ctx, h.ID)
	require.NoError(t, err)
	require.Contains(t, string(out[:min(len(out), 4096)]), "session: first-line")
	require.Contains(t, string(out), "bytes of output dropped here")
}
