package admin_test

import (
	"bytes"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
)

func TestPageAuth(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef-page-token"
	h := admin.PageAuth("/ui", token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("page " + r.URL.Path))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/ui/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req.Header.Set("Authorization", "Bearer wrong")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"token": {"wrong"}, "next": {"/ui/runs/3"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"token": {token}, "next": {"/ui/runs/3"}})
	require.NoError(t, err)
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, "page /ui/runs/3", b.String())
	u, _ := url.Parse(srv.URL + "/ui/")
	for _, ck := range jar.Cookies(u) {
		require.NotContains(t, ck.Value, token, "the cookie holds an HMAC, not the token")
	}

	resp, err = http.Get(srv.URL + "/ui/login?token=" + token + "&next=//evil.example/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, srv.URL+"/ui/", resp.Request.URL.String(), "next stays under the prefix")
}
