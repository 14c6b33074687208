package runner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
)

func TestInstanceNameIsUniquePerInstanceAndFitsADNSLabel(t *testing.T) {
	t.Parallel()
	a, b := CompileConfig{Instance: "59bac303cb2f"}, CompileConfig{Instance: "0123456789ab"}
	base := ContainerName(1, 3, phase.Development, 1)
	require.Equal(t, "alfred-59bac303cb2f-mbx1-r3-development-a1", a.InstanceName(base))
	require.NotEqual(t, a.InstanceName(base), b.InstanceName(base), "two suites on one daemon do not collide")

	long := ContainerName(123456789, 987654321, phase.ConflictResolution, 12)
	got := a.InstanceName(long)
	require.LessOrEqual(t, len(got), MaxContainerName)
	require.True(t, strings.HasPrefix(got, "alfred-59bac303cb2f-mbx123456789-"))
	require.Equal(t, got, a.InstanceName(long), "the same run gets the same name")
	require.NotEqual(t, got, a.InstanceName(ContainerName(123456789, 987654321, phase.ConflictResolution, 13)))
}
