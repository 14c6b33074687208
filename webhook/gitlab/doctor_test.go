package gitlab_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestClientPermissionAndHooks(t *testing.T) {
	t.Parallel()
	s := forgetest.NewGitLabServer(t)
	s.AddRepo("grp/sub/proj", "main", "https://gitlab.example/grp/sub/proj.git")
	c := newClient(t, s, s.Token)

	p, err := c.Permission(t.Context(), "grp/sub/proj")
	require.NoError(t, err)
	require.Equal(t, forge.Permission{Role: "none"}, p)

	s.SetAccessLevel("grp/sub/proj", forgetest.BotLogin, 30)
	p, err = c.Permission(t.Context(), "grp/sub/proj")
	require.NoError(t, err)
	require.Equal(t, forge.Permission{Read: true, Write: true, Role: "Developer"}, p)
	_, err = c.Hooks(t.Context(), "grp/sub/proj")
	require.ErrorIs(t, err, forge.ErrForbidden, "Maintainer needed")

	s.SetAccessLevel("grp/sub/proj", forgetest.BotLogin, 40)
	want := forge.Hook{URL: "https://alfred.example/webhooks/gl", ContentType: "json",
		Events: []string{"issues", "note", "merge_requests", "pipeline"}, Active: true}
	want.ID = s.AddHook("grp/sub/proj", want)
	hooks, err := c.Hooks(t.Context(), "grp/sub/proj")
	require.NoError(t, err)
	require.Equal(t, []forge.Hook{want}, hooks)
}
