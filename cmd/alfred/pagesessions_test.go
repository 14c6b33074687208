package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/web"
)

// Two replicas on one PostgreSQL schema share the operator's session: signed in through one,
// the browser's cookie opens the pages of the other; a replica started afresh (a restart, its
// own pool) still knows it; a logout through one ends it on all; and a replica started with
// another admin token refuses it. Each replica is the pages' guard of `alfred serve`
// (guardPages) on its own store, as opened by serve.
func TestPageSessionsSharedByReplicas(t *testing.T) {
	t.Parallel()
	dsn := testDatabaseURL(t, storePostgres)
	const token = "replicas-share-this-admin-token"
	replica := func(token string) (*httptest.Server, *sqlstore.Store) {
		st, err := store.Open(context.Background(), dsn, t.TempDir(), postgres.Pool{}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		srv := httptest.NewServer(guardPages(token, st, admin.NewAttempts(admin.DefaultAttemptLimits()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("page " + r.URL.Path))
		})))
		t.Cleanup(srv.Close)
		return srv, st
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(srv *httptest.Server, c *http.Cookie) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+web.Prefix+"/", nil)
		require.NoError(t, err)
		req.AddCookie(c)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	a, storeA := replica(token)
	b, _ := replica(token)
	resp, err := noRedirect.PostForm(a.URL+web.Prefix+"/login", url.Values{"token": {token}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "alfred_ui" {
			cookie = c
		}
	}
	require.NotNil(t, cookie, "the login sets the session cookie")
	require.Equal(t, http.StatusOK, get(a, cookie))
	require.Equal(t, http.StatusOK, get(b, cookie), "signed in through a, the cookie opens b")

	var stored []string
	require.NoError(t, storeA.DB().SelectContext(context.Background(), &stored, `SELECT id_hash || ' ' || token_fingerprint FROM operator_sessions`))
	require.Len(t, stored, 1)
	require.NotContains(t, stored[0], cookie.Value, "the store keeps the id's hash, never the id")
	require.NotContains(t, stored[0], token)

	a.Close()
	require.NoError(t, storeA.Close())
	restarted, _ := replica(token)
	require.Equal(t, http.StatusOK, get(restarted, cookie), "a restart signs nobody out")

	otherToken, _ := replica("a-new-admin-token-after-rotation")
	require.Equal(t, http.StatusUnauthorized, get(otherToken, cookie), "a session belongs to the token it was opened with")

	req, err := http.NewRequest(http.MethodPost, restarted.URL+web.Prefix+"/logout", strings.NewReader(""))
	require.NoError(t, err)
	req.AddCookie(cookie)
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, http.StatusUnauthorized, get(b, cookie), "a logout through one replica ends the session on all")
}
