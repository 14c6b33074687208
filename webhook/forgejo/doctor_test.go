package forgejo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestClientPermissionAndHooks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := b.c.Permission(t.Context(), "org/proj")
	require.NoError(t, err)
	require.Equal(t, forge.Permission{Read: true, Role: "read"}, p)
	_, err = b.c.Hooks(t.Context(), "org/proj")
	require.ErrorIs(t, err, forge.ErrForbidden, "only admins list hooks")

	b.s.SetAccessLevel("org/proj", forgetest.BotLogin, 40)
	p, err = b.c.Permission(t.Context(), "org/proj")
	require.NoError(t, err)
	require.Equal(t, forge.Permission{Read: true, Write: true, Admin: true, Role: "admin"}, p)
	want := forge.Hook{URL: "https://alfred.example/webhooks/fj", ContentType: "json",
		Events: []string{"issues", "issue_assign"}, Active: true}
	want.ID = b.s.AddHook("org/proj", want)
	b.s.SetPageSize(1)
	b.s.AddHook("org/proj", forge.Hook{URL: "https://ci.example/hook", ContentType: "form"})
	hooks, err := b.c.Hooks(t.Context(), "org/proj")
	require.NoError(t, err)
	require.Len(t, hooks, 2, "every page")
	require.Equal(t, want, hooks[0])

	_, err = b.c.Permission(t.Context(), "org/missing")
	require.ErrorIs(t, err, forge.ErrNotFound)
}
