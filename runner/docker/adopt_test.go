package docker_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// Two processes (two Runtime values on two clients) create the same run's container: the one
// that loses the race gets ErrNameConflict and never destroys the winner's live container,
// whether the loser comes after the winner started or both create at the same moment.
func TestCreateRaceNeverDestroysTheHolder(t *testing.T) {
	cli := runtimetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	image := runtimetest.BuildImage(t, ctx, cli, fmt.Sprintf("alfred-test/probe:race-%d", os.Getpid()), runtimetest.ProbePackage)
	cli2, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli2.Close() })
	procA, procB := docker.New(cli), docker.New(cli2)

	spec := func(name string) runner.ContainerSpec {
		return runner.ContainerSpec{Name: name, Image: image, Cmd: []string{"sleep", "60"}, WorkingDir: "/",
			User: runtimetest.ImageUser, Limits: runner.Limits{MemoryBytes: 64 << 20, PIDs: 32},
			Labels: map[string]string{runner.LabelManaged: "true", runner.LabelRun: name, "alfred.test.race": "1"}}
	}
	requireAlive := func(rt runner.Runtime, name string, id runner.ContainerID) {
		t.Helper()
		h, err := rt.Adopt(ctx, name)
		require.NoError(t, err, "the holder's container was removed")
		require.Equal(t, id, h.ID, "the name now points at another container")
		require.True(t, h.Running, "the holder's container was stopped")
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer wcancel()
		_, err = rt.Wait(wctx, id)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the holder's container exited")
	}

	t.Run("Sequential", func(t *testing.T) {
		name := fmt.Sprintf("alfred-race-%d-seq", os.Getpid())
		a, err := procA.Start(ctx, spec(name))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, procA.Destroy(context.Background(), a.ID)) })
		require.Equal(t, runner.OriginCreated, a.Origin)

		// B's create fails on A's name; the failure path must not touch A's container.
		_, err = procB.Start(ctx, spec(name))
		require.ErrorIs(t, err, runner.ErrNameConflict)
		requireAlive(procA, name, a.ID)
		requireAlive(procB, name, a.ID)
	})

	t.Run("Concurrent", func(t *testing.T) {
		name := fmt.Sprintf("alfred-race-%d-conc", os.Getpid())
		const n = 6
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []runner.Handle
			losers  int
		)
		start := make(chan struct{})
		for i := range n {
			rt := procA
			if i%2 == 1 {
				rt = procB
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				h, err := rt.Start(ctx, spec(name))
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					winners = append(winners, h)
					return
				}
				require.ErrorIs(t, err, runner.ErrNameConflict)
				losers++
			}()
		}
		close(start)
		wg.Wait()
		for _, w := range winners {
			t.Cleanup(func() { require.NoError(t, procA.Destroy(context.Background(), w.ID)) })
		}
		require.Len(t, winners, 1, "exactly one create wins")
		require.Equal(t, n-1, losers)
		requireAlive(procA, name, winners[0].ID)
		list, err := procB.List(ctx, map[string]string{runner.LabelRun: name})
		require.NoError(t, err)
		require.Len(t, list, 1)
	})
}
