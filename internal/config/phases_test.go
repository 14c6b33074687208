package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
)

func TestPhasesBindings(t *testing.T) {
	t.Run("every phase falls back to the default", func(t *testing.T) {
		got := Phases{PhaseDefault: "script", "development": "claude"}.Bindings()
		require.Len(t, got, len(phase.All()))
		require.Equal(t, "claude", got[phase.Development])
		require.Equal(t, "script", got[phase.Review])
	})
	t.Run("a phase with no agent is absent", func(t *testing.T) {
		got := Phases{"review": "claude"}.Bindings()
		require.Equal(t, map[phase.Phase]string{phase.Review: "claude"}, got)
	})
}
