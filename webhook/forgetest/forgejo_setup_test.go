package forgetest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestForgejoSetupRefuses: the setup calls check the Basic credentials and who may make them,
// as Forgejo does.
func TestForgejoSetupRefuses(t *testing.T) {
	t.Parallel()
	s := NewForgejoServer(t)
	s.EnableSetup("alice", "alice-pw-1234")
	call := func(method, path, user, pass, body string) int {
		req, err := http.NewRequest(method, s.URL+"/api/v1"+path, strings.NewReader(body))
		require.NoError(t, err)
		req.SetBasicAuth(user, pass)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	user := `{"username":"carol","email":"carol@example.org","password":"carol-pw-1234"}`
	require.Equal(t, http.StatusUnauthorized, call("POST", "/admin/users", "alice", "wrong", user))
	require.Equal(t, http.StatusCreated, call("POST", "/admin/users", "alice", "alice-pw-1234", user))
	require.Equal(t, http.StatusUnprocessableEntity, call("POST", "/admin/users", "alice", "alice-pw-1234", user), "exists")
	require.Equal(t, http.StatusForbidden, call("POST", "/admin/users", "carol", "carol-pw-1234",
		`{"username":"dave","email":"d@example.org","password":"dave-pw-1234"}`), "not an administrator")
	require.Equal(t, http.StatusForbidden, call("POST", "/users/alice/tokens", "carol", "carol-pw-1234",
		`{"name":"t","scopes":["read:user"]}`), "another account's token")
	require.Equal(t, http.StatusBadRequest, call("POST", "/users/carol/tokens", "carol", "carol-pw-1234", `{"name":"t"}`), "no scope")
	require.Equal(t, http.StatusCreated, call("POST", "/user/repos", "alice", "alice-pw-1234", `{"name":"shop","auto_init":true}`))
	require.Equal(t, http.StatusConflict, call("POST", "/user/repos", "alice", "alice-pw-1234", `{"name":"shop"}`))
	require.Equal(t, http.StatusForbidden, call("PUT", "/repos/alice/shop/collaborators/carol", "carol", "carol-pw-1234",
		`{"permission":"admin"}`), "not the owner")
	require.Equal(t, http.StatusUnprocessableEntity, call("PUT", "/repos/alice/shop/collaborators/nobody", "alice", "alice-pw-1234",
		`{"permission":"admin"}`))
	require.Equal(t, http.StatusNoContent, call("PUT", "/repos/alice/shop/collaborators/carol", "alice", "alice-pw-1234",
		`{"permission":"write"}`))
	require.Equal(t, http.StatusUnprocessableEntity, call("POST", "/repos/alice/shop/hooks", "alice", "alice-pw-1234",
		`{"type":"slack","config":{"url":"http://x","content_type":"json"}}`))
	require.Equal(t, http.StatusCreated, call("POST", "/repos/alice/shop/hooks", "alice", "alice-pw-1234",
		`{"type":"forgejo","active":true,"config":{"url":"http://x/webhooks/forgejo","content_type":"json","secret":"s"},"events":["issues"]}`))
}
