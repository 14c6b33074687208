package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServerAndPoolDefaults(t *testing.T) {
	c, err := loadYAML(t, minimalYAML)
	require.NoError(t, err)
	require.Equal(t, HTTP{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 60 * time.Second, MaxConcurrent: 64, MaxReaders: 1024, MaxBodyMemory: 64 << 20,
		MaxHeaderBytes: 64 << 10}, c.HTTP)
	require.Equal(t, Database{MaxOpenConns: 16, MaxIdleConns: 16, ConnMaxLifetime: 30 * time.Minute,
		ConnMaxIdleTime: 5 * time.Minute}, c.Database)
	require.Empty(t, c.Admin.Listen, "the admin endpoints are off by default")
}

func TestServerAndPoolValidation(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"no connections":      {"database: {max_open_conns: -1}\n", "database.max_open_conns: must be at least 1"},
		"admin without token": {"admin: {listen: 127.0.0.1:8081}\n", "admin.token: required"},
		"admin on webhook port": {"listen: 127.0.0.1:8081\nadmin: {listen: 127.0.0.1:8081, token: tok-s3cr3t-admin}\n",
			"admin.listen: must differ from listen"},
		"negative read timeout": {"http: {read_timeout: -1s}\n", "http.read_timeout: must be a positive duration"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadYAML(t, minimalYAML+tc.yaml)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestPostLimitsFromEnvironment(t *testing.T) {
	c, err := loadYAML(t, minimalYAML, "ALFRED_FORGES_FORGEJO_MAX_COMMENT_BYTES=60000", "ALFRED_FORGES_FORGEJO_MAX_DESCRIPTION_BYTES=50000")
	require.NoError(t, err)
	require.Equal(t, 60000, c.Forges[0].MaxCommentBytes)
	require.Equal(t, 50000, c.Forges[0].MaxDescriptionBytes)
	_, err = loadYAML(t, minimalYAML, "ALFRED_FORGES_FORGEJO_MAX_COMMENT_BYTES=lots")
	require.ErrorContains(t, err, "ALFRED_FORGES_FORGEJO_MAX_COMMENT_BYTES: not a whole number of bytes")
	_, err = loadYAML(t, strings.Replace(minimalYAML, "bot_user: alfred", "bot_user: alfred\n    max_comment_bytes: 10", 1))
	require.ErrorContains(t, err, "forges[0].max_comment_bytes: must be at least 1024")
}

func TestServerPoolAndAdminFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	tokenFile := writeFile(t, dir, "admin_token", "env-admin-s3cr3t\n")
	c, err := loadYAML(t, minimalYAML, "ALFRED_HTTP_READ_TIMEOUT=7s", "ALFRED_HTTP_MAX_CONCURRENT=9",
		"ALFRED_DATABASE_MAX_OPEN_CONNS=5", "ALFRED_ADMIN_LISTEN=127.0.0.1:9999", "ALFRED_ADMIN_TOKEN_FILE="+tokenFile)
	require.NoError(t, err)
	require.Equal(t, 7*time.Second, c.HTTP.ReadTimeout)
	require.Equal(t, 9, c.HTTP.MaxConcurrent)
	require.Equal(t, 5, c.Database.MaxOpenConns)
	require.Equal(t, "127.0.0.1:9999", c.Admin.Listen)
	require.Equal(t, "env-admin-s3cr3t", c.Admin.Token.Reveal())
	require.Contains(t, c.Secrets(), "env-admin-s3cr3t", "the admin token is censored like every secret")
	require.NotContains(t, c.Dump(), "env-admin-s3cr3t")
}
