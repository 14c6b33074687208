package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServerAndPoolDefaults(t *testing.T) {
	c, err := loadYAML(t, minimalYAML)
	require.NoError(t, err)
	require.Equal(t, HTTP{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 60 * time.Second, MaxConcurrent: 64, MaxHeaderBytes: 64 << 10}, c.HTTP)
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
