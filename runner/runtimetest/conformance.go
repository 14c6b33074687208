package runtimetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
)

// labelSuite marks every container of one conformance run, so the suite can clean up after itself.
const labelSuite = "alfred.test.suite"

// RunRuntimeConformance runs the runner.Runtime contract against rt. image must be built from
// ProbePackage by BuildImage (USER ImageUser). The runtime must see the host filesystem (bind
// mount sources are temp dirs of this process). Subtests run in parallel; every container they
// create carries the label alfred.managed=true and is destroyed at the end.
//
// Covered: exit codes; stdout and stderr kept apart (or, with MergedLogs, both in stdout); a read-only workspace mount is enforced
// and a read-write one is writable; the root filesystem is read-only with writable /tmp and
// HOME; the user is not root and root specs are refused; all capabilities dropped and
// no-new-privileges set; Destroy is idempotent; List filters by labels; a name already held
// (foreign, another run's, or the same run's, running or stopped) is refused with
// ErrNameConflict and the holder left alone; Adopt finds a managed container by name or id,
// reports it adopted, refuses a missing (ErrContainerNotFound) or foreign (ErrNotManaged) one,
// and Teardown leaves an adopted container alone;
// Stop ends the container (SIGTERM, then SIGKILL after the grace) and Wait reports Killed; Wait
// honours its ctx; a missing image is runner.ErrImageNotFound.
//
// The function is long because it is a list: one independent t.Run per clause of the
// runner.Runtime contract above, sharing only the suite's cleanup and spec helpers, so that the
// whole contract reads in one place.
func RunRuntimeConformance(t *testing.T, rt runner.Runtime, image string) {
	RunRuntimeConformanceWith(t, rt, image, ConformanceOptions{})
}

// ConformanceOptions declare what a runtime's platform cannot do, for
// RunRuntimeConformanceWith. The zero value holds a runtime to the whole contract.
type ConformanceOptions struct {
	// MergedLogs: the platform's log API merges stdout and stderr (Kubernetes), so Logs returns
	// both streams' lines in stdout and an empty stderr. Without it, the streams must come
	// apart.
	MergedLogs bool
}

// RunRuntimeConformanceWith is RunRuntimeConformance with the clauses opts relaxes checked in
// their relaxed form.
func RunRuntimeConformanceWith(t *testing.T, rt runner.Runtime, image string, opts ConformanceOptions) {
	suite := randomHex(4)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := rt.List(ctx, map[string]string{labelSuite: suite})
		if err != nil {
			t.Errorf("list leftovers: %v", err)
			return
		}
		for _, c := range list {
			t.Errorf("container %s left behind by the suite", c.Name)
			_ = rt.Destroy(ctx, c.ID)
		}
	})

	// spec returns a hardened spec for this suite with a unique name and run label.
	spec := func(t *testing.T, cmd ...string) runner.ContainerSpec {
		run := randomHex(6)
		return runner.ContainerSpec{
			Name:       "alfred-conf-" + suite + "-" + run,
			Image:      image,
			Cmd:        cmd,
			WorkingDir: "/",
			User:       ImageUser,
			Labels: map[string]string{
				runner.LabelManaged: "true",
				runner.LabelRun:     "conf-" + run,
				labelSuite:          suite,
			},
			Limits: runner.Limits{MemoryBytes: 128 << 20, NanoCPUs: 1e9, PIDs: 64},
		}
	}
	start := func(t *testing.T, s runner.ContainerSpec) runner.ContainerID {
		t.Helper()
		h, err := rt.Start(t.Context(), s)
		require.NoError(t, err)
		require.Equal(t, runner.OriginCreated, h.Origin)
		require.True(t, h.Created())
		id := h.ID
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, rt.Destroy(ctx, id))
		})
		return id
	}
	// run starts s, waits for the exit and returns the exit state and logs.
	run := func(t *testing.T, s runner.ContainerSpec) (runner.ExitState, string, string) {
		t.Helper()
		id := start(t, s)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		st, err := rt.Wait(ctx, id)
		require.NoError(t, err)
		out, errOut, err := rt.Logs(ctx, id)
		require.NoError(t, err)
		return st, string(out), string(errOut)
	}

	t.Run("ExitCode", func(t *testing.T) {
		t.Parallel()
		st, _, _ := run(t, spec(t, "exit", "3"))
		require.Equal(t, 3, st.Code)
		require.False(t, st.Killed)
		require.False(t, st.OOMKilled)
		st, _, _ = run(t, spec(t, "exit", "0"))
		require.Equal(t, 0, st.Code)
	})

	t.Run("LogsSeparateStdoutStderr", func(t *testing.T) {
		t.Parallel()
		st, out, errOut := run(t, spec(t, "print", "to-stdout", "to-stderr"))
		require.Equal(t, 0, st.Code)
		if opts.MergedLogs {
			// One line each, in stdout; the order across two pipes is not promised.
			require.ElementsMatch(t, []string{"to-stdout\n", "to-stderr\n", ""}, strings.SplitAfter(out, "\n"), "%q", out)
			require.Empty(t, errOut)
			return
		}
		require.Equal(t, "to-stdout\n", out)
		require.Equal(t, "to-stderr\n", errOut)
	})

	t.Run("WorkspaceReadOnlyEnforced", func(t *testing.T) {
		t.Parallel()
		dir := writableDir(t)
		s := spec(t, "try-write", runner.WorkspaceDir+"/ro.txt")
		s.Mounts = []runner.Mount{{Source: dir, Target: runner.WorkspaceDir, ReadOnly: true}}
		st, out, _ := run(t, s)
		require.Equal(t, 1, st.Code, out)
		require.Contains(t, out, "read-only file system")
		require.NoFileExists(t, filepath.Join(dir, "ro.txt"))

		s = spec(t, "try-write", runner.WorkspaceDir+"/rw.txt")
		s.Mounts = []runner.Mount{{Source: dir, Target: runner.WorkspaceDir}}
		st, out, _ = run(t, s)
		require.Equal(t, 0, st.Code, out)
		require.FileExists(t, filepath.Join(dir, "rw.txt"))
	})

	t.Run("RootfsReadOnlyTmpAndHomeWritable", func(t *testing.T) {
		t.Parallel()
		st, out, _ := run(t, spec(t, "try-write", "/probe-was-here"))
		require.Equal(t, 1, st.Code, out)
		require.Contains(t, out, "denied")
		for _, p := range []string{"/tmp/x", runner.HomeDir + "/x"} {
			st, out, _ = run(t, spec(t, "try-write", p))
			require.Equal(t, 0, st.Code, "%s: %s", p, out)
		}
	})

	t.Run("NonRoot", func(t *testing.T) {
		t.Parallel()
		_, out, _ := run(t, spec(t, "uid"))
		require.Equal(t, ImageUser+"\n", out)
		for _, u := range []string{"", "0", "0:0", "root", "root:root", "0:65532"} {
			s := spec(t, "uid")
			s.User = u
			h, err := rt.Start(t.Context(), s)
			require.Error(t, err, "user %q", u)
			require.Empty(t, h.ID)
			list, err := rt.List(t.Context(), map[string]string{runner.LabelRun: s.Labels[runner.LabelRun]})
			require.NoError(t, err)
			require.Empty(t, list, "a container was created for user %q", u)
		}
	})

	t.Run("CapabilitiesDroppedNoNewPrivileges", func(t *testing.T) {
		t.Parallel()
		_, out, _ := run(t, spec(t, "status"))
		require.Contains(t, out, "CapEff: 0000000000000000")
		require.Contains(t, out, "NoNewPrivs: 1")
	})

	t.Run("DestroyIdempotent", func(t *testing.T) {
		t.Parallel()
		s := spec(t, "sleep", "60")
		h, err := rt.Start(t.Context(), s)
		require.NoError(t, err)
		id := h.ID
		require.NoError(t, rt.Destroy(t.Context(), id))
		require.NoError(t, rt.Destroy(t.Context(), id))
		require.NoError(t, rt.Destroy(t.Context(), "0123456789abcdef-does-not-exist"))
		list, err := rt.List(t.Context(), map[string]string{runner.LabelRun: s.Labels[runner.LabelRun]})
		require.NoError(t, err)
		require.Empty(t, list)

		// A cancelled ctx still destroys (fresh bounded ctx inside).
		s = spec(t, "sleep", "60")
		h, err = rt.Start(t.Context(), s)
		require.NoError(t, err)
		id = h.ID
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, rt.Destroy(ctx, id))
		list, err = rt.List(t.Context(), map[string]string{runner.LabelRun: s.Labels[runner.LabelRun]})
		require.NoError(t, err)
		require.Empty(t, list)
	})

	t.Run("ListByLabel", func(t *testing.T) {
		t.Parallel()
		group := randomHex(6)
		a, b := spec(t, "sleep", "60"), spec(t, "exit", "0")
		a.Labels["alfred.test.group"], b.Labels["alfred.test.group"] = group, group
		ida, idb := start(t, a), start(t, b)
		list, err := rt.List(t.Context(), map[string]string{"alfred.test.group": group})
		require.NoError(t, err)
		byName := map[string]runner.Container{}
		for _, c := range list {
			byName[c.Name] = c
		}
		require.Len(t, byName, 2)
		require.Equal(t, ida, byName[a.Name].ID)
		require.Equal(t, idb, byName[b.Name].ID)
		require.True(t, byName[a.Name].Running)
		require.Equal(t, group, byName[a.Name].Labels["alfred.test.group"])

		list, err = rt.List(t.Context(), map[string]string{"alfred.test.group": group, runner.LabelRun: a.Labels[runner.LabelRun]})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, a.Name, list[0].Name)
	})

	t.Run("NameCollision", func(t *testing.T) {
		t.Parallel()
		// A foreign container (no managed label) holds the name: refused, left alone.
		foreign := spec(t, "sleep", "60")
		delete(foreign.Labels, runner.LabelManaged)
		fid := start(t, foreign)
		ours := spec(t, "exit", "0")
		ours.Name = foreign.Name
		ours.Labels[runner.LabelRun] = foreign.Labels[runner.LabelRun]
		_, err := rt.Start(t.Context(), ours)
		require.ErrorIs(t, err, runner.ErrNameConflict)
		list, err := rt.List(t.Context(), map[string]string{runner.LabelRun: foreign.Labels[runner.LabelRun]})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, fid, list[0].ID)

		// A managed container of another run holds the name: refused too.
		other := spec(t, "sleep", "60")
		start(t, other)
		mine := spec(t, "exit", "0")
		mine.Name = other.Name
		_, err = rt.Start(t.Context(), mine)
		require.ErrorIs(t, err, runner.ErrNameConflict)

		// Creating is not resuming: a managed container of the same run, running or stopped,
		// is refused and left alone; only Adopt takes it over, and reports it adopted.
		left := spec(t, "sleep", "60")
		oldID := start(t, left)
		again := left
		again.Cmd = []string{"exit", "4"}
		_, err = rt.Start(t.Context(), again)
		require.ErrorIs(t, err, runner.ErrNameConflict)
		adopted, err := rt.Adopt(t.Context(), left.Name)
		require.NoError(t, err)
		require.Equal(t, oldID, adopted.ID)
		require.Equal(t, runner.OriginAdopted, adopted.Origin)
		require.False(t, adopted.Created())
		require.True(t, adopted.Running, "the holder still runs")
		require.Equal(t, left.Labels[runner.LabelRun], adopted.Labels[runner.LabelRun])
		byID, err := rt.Adopt(t.Context(), string(oldID))
		require.NoError(t, err)
		require.Equal(t, left.Name, byID.Name)
		// Teardown of an adopted handle removes nothing.
		require.NoError(t, runner.Teardown(t.Context(), rt, adopted))
		exited := spec(t, "exit", "0")
		exitedID := start(t, exited)
		_, err = rt.Wait(t.Context(), exitedID)
		require.NoError(t, err)
		_, err = rt.Start(t.Context(), exited)
		require.ErrorIs(t, err, runner.ErrNameConflict, "a stopped holder is refused too")
		stopped, err := rt.Adopt(t.Context(), exited.Name)
		require.NoError(t, err)
		require.False(t, stopped.Running)
		for _, s := range []runner.ContainerSpec{left, exited} {
			list, err = rt.List(t.Context(), map[string]string{runner.LabelRun: s.Labels[runner.LabelRun]})
			require.NoError(t, err)
			require.Len(t, list, 1, "the holder of %s was removed", s.Name)
		}

		// Adopt refuses what is missing or not Alfred's.
		_, err = rt.Adopt(t.Context(), "alfred-conf-"+suite+"-absent")
		require.ErrorIs(t, err, runner.ErrContainerNotFound)
		_, err = rt.Adopt(t.Context(), foreign.Name)
		require.ErrorIs(t, err, runner.ErrNotManaged)
	})

	t.Run("StopKills", func(t *testing.T) {
		t.Parallel()
		id := start(t, spec(t, "sleep", "60"))
		require.NoError(t, rt.Stop(t.Context(), id, time.Second))
		st, err := rt.Wait(t.Context(), id)
		require.NoError(t, err)
		require.True(t, st.Killed)
		require.NotEqual(t, 0, st.Code)

		// SIGTERM ignored: SIGKILL after the grace.
		id = start(t, spec(t, "sleep-ignore-term", "60"))
		time.Sleep(300 * time.Millisecond) // let the probe install its signal handler
		began := time.Now()
		require.NoError(t, rt.Stop(t.Context(), id, time.Second))
		require.GreaterOrEqual(t, time.Since(began), 900*time.Millisecond)
		st, err = rt.Wait(t.Context(), id)
		require.NoError(t, err)
		require.True(t, st.Killed)
		require.Equal(t, 137, st.Code)

		// Stopping a stopped container is fine.
		require.NoError(t, rt.Stop(t.Context(), id, time.Second))
	})

	t.Run("WaitHonoursContext", func(t *testing.T) {
		t.Parallel()
		id := start(t, spec(t, "sleep", "60"))
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := rt.Wait(ctx, id)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("MissingImage", func(t *testing.T) {
		t.Parallel()
		s := spec(t, "exit", "0")
		s.Image = "alfred-test/no-such-image:" + randomHex(4)
		_, err := rt.Start(t.Context(), s)
		require.ErrorIs(t, err, runner.ErrImageNotFound)
	})
}

// writableDir returns a temp dir the image's user can write (chowned when running as root,
// otherwise world-writable).
func writableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(dir, ImageUID, ImageGID))
	} else {
		require.NoError(t, os.Chmod(dir, 0o777))
	}
	return dir
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(errors.Join(errors.New("crypto/rand"), err))
	}
	return strings.ToLower(hex.EncodeToString(b))
}
