package runner

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/alfred-bot/alfred/runner/phase"
)

func TestInstanceNameIsUniquePerInstanceAndFitsADNSLabel(t *testing.T) {
	t.Parallel()
	a, b := CompileConfig{Instance: "59bac303cb2f"}, CompileConfig{Instance: "0123456789ab"}
	base := ContainerName(1, 3, phase.Development, 1)
	require.Equal(t, "alfred-59bac303cb2f-mbx1-r3-development-a1", a.InstanceName(base))
	require.NotEqual(t, a.InstanceName(base), b.InstanceName(base), "two suites on one daemon do not collide")

	for _, p := range phase.All() {
		name := a.InstanceName(ContainerName(1, 3, p, 1)) + "-fresh" // the longest suffix a run adds
		require.Empty(t, validation.IsDNS1123Label(name), "%s: a Pod's name on Kubernetes", name)
	}
	require.Equal(t, "alfred-59bac303cb2f-mbx1-r3-ci-fix-a1", a.InstanceName(ContainerName(1, 3, phase.CIFix, 1)))

	long := ContainerName(123456789, 987654321, phase.ConflictResolution, 12)
	got := a.InstanceName(long)
	require.LessOrEqual(t, len(got), MaxContainerName)
	require.True(t, strings.HasPrefix(got, "alfred-59bac303cb2f-mbx123456789-"))
	require.Equal(t, got, a.InstanceName(long), "the same run gets the same name")
	require.NotEqual(t, got, a.InstanceName(ContainerName(123456789, 987654321, phase.ConflictResolution, 13)))

	// Every phase's name is a DNS label (RFC 1123), as a Kubernetes Pod's name must be.
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, p := range []phase.Phase{phase.Analysis, phase.Development, phase.CIFix, phase.ReviewFix,
		phase.ConflictResolution, phase.Answer, phase.Review} {
		for _, n := range []string{a.InstanceName(ContainerName(1, 3, p, 1)), a.InstanceName(ContainerName(123456789, 987654321, p, 12))} {
			require.Regexp(t, label, n)
			require.LessOrEqual(t, len(n), MaxContainerName)
		}
	}
	require.Equal(t, "alfred-mbx1-r3-ci-fix-a1", ContainerName(1, 3, phase.CIFix, 1))
}

func TestReapRemovesRunDirsOfMailboxesNotKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := &Executor{cc: CompileConfig{DataDir: dir, Instance: "59bac303cb2f"}}
	other := CompileConfig{DataDir: dir, Instance: "0123456789ab"}
	kept := e.cc.InstanceName(ContainerName(5, 1, phase.Analysis, 1))
	left := e.cc.InstanceName(ContainerName(6, 2, phase.Development, 1))
	foreign := other.InstanceName(ContainerName(6, 2, phase.Development, 1))
	for _, n := range []string{kept, left, foreign} {
		require.NoError(t, os.MkdirAll(filepath.Join(e.cc.RunDir(n), "out"), 0o755))
	}
	require.NoError(t, e.sweepRunDirs(func(id int64) bool { return id == 5 }))
	require.DirExists(t, e.cc.RunDir(kept))
	require.NoDirExists(t, e.cc.RunDir(left), "left by a process killed before its container ran")
	require.DirExists(t, e.cc.RunDir(foreign), "another installation's")
}
