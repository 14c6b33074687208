package gate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	d := gate.DefaultNeeds()
	steer := gate.Input{Kind: gate.SteerLabel, State: gate.Working}
	for role, want := range map[forge.Role]gate.Decision{forge.RoleNone: gate.Refused, forge.RoleRead: gate.Refused,
		forge.RoleTriage: gate.Refused, forge.RoleWrite: gate.Allowed, forge.RoleAdmin: gate.Allowed} {
		steer.Role = role
		require.Equal(t, want, gate.Decide(d, steer), role.String())
	}
	// The author answers and sets the type whatever their role, but never steers.
	require.Equal(t, gate.Allowed, gate.Decide(d, gate.Input{Kind: gate.Answer, State: gate.Working, Role: forge.RoleRead, Author: true}))
	require.Equal(t, gate.Allowed, gate.Decide(d, gate.Input{Kind: gate.StateLabel, State: gate.Working, Author: true}))
	require.Equal(t, gate.Refused, gate.Decide(d, gate.Input{Kind: gate.SteerLabel, State: gate.Idle, Role: forge.RoleTriage, Author: true}))
	// Configuration lowers or raises a need.
	lower := gate.Needs{gate.SteerLabel: forge.RoleTriage}
	require.Equal(t, gate.Allowed, gate.Decide(lower, gate.Input{Kind: gate.SteerLabel, State: gate.Blocked, Role: forge.RoleTriage}))
	require.Equal(t, forge.RoleWrite, lower.Need(gate.Answer), "a kind not named keeps its default")
	require.Error(t, gate.Needs{"labels": forge.RoleRead}.Validate())
	require.Equal(t, gate.Ignored, gate.Decide(d, gate.Input{Kind: "nope", State: gate.Idle, Role: forge.RoleAdmin}))
}

func TestParseRole(t *testing.T) {
	t.Parallel()
	for i, n := range []string{"none", "read", "triage", "write", "admin"} {
		r, err := forge.ParseRole(n)
		require.NoError(t, err)
		require.Equal(t, forge.Role(i), r)
		require.Equal(t, n, r.String())
	}
	_, err := forge.ParseRole("maintainer")
	require.Error(t, err)
	require.Equal(t, forge.RoleTriage, forge.GitLabRole(20))
	require.Equal(t, forge.RoleNone, forge.GitLabRole(0))
	require.Equal(t, forge.RoleTriage, forge.ForgejoRole("read", true))
	require.Equal(t, forge.RoleAdmin, forge.ForgejoRole("owner", false))
}
