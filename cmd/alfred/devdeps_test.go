package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
)

// devDepsSQL returns the SQL scripts/dev-deps.sh gives psql for the development role, with its
// shell variables: the role name replaced by role, and the password the script sets.
func devDepsSQL(t *testing.T, role string) (sql, password string) {
	t.Helper()
	b, err := os.ReadFile("../../scripts/dev-deps.sh")
	require.NoError(t, err)
	script := string(b)
	m := regexp.MustCompile(`(?m)^dev_password=(\S+)$`).FindStringSubmatch(script)
	require.NotNil(t, m, "dev-deps.sh sets dev_password")
	password = m[1]
	body := regexp.MustCompile(`(?s)<<SQL\n(.*?)\nSQL\n`).FindStringSubmatch(script)
	require.NotNil(t, body, "dev-deps.sh gives psql the role's SQL in a <<SQL here-document")
	sql = strings.NewReplacer(`\$`, "$", "$dev_role", role, "$dev_password", password).Replace(body[1])
	return sql, password
}

// TestDevDepsRolePassword: the SQL of scripts/dev-deps.sh creates the development role with the
// Makefile's password, and on a machine where the role already exists with the old password
// ("alfred", which Alfred now refuses) sets the new one; run again it changes nothing. It runs
// on a throwaway role, never on the live one. The Makefile's test database URL carries the same
// password, and the configuration accepts it.
func TestDevDepsRolePassword(t *testing.T) {
	t.Parallel()
	base := pgtest.URL(t)
	ctx := context.Background()
	db, err := sqlx.ConnectContext(ctx, "postgres", base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "alfred_devdeps_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = db.ExecContext(ctx, "DROP ROLE IF EXISTS "+role) })
	sql, password := devDepsSQL(t, role)

	login := func(pw string) error {
		u, err := url.Parse(base)
		require.NoError(t, err)
		u.User = url.UserPassword(role, pw)
		c, err := sqlx.ConnectContext(ctx, "postgres", u.String())
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	// A machine set up by the old script: the role exists with the word password.
	_, err = db.ExecContext(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'alfred'")
	require.NoError(t, err)
	require.NoError(t, login("alfred"))
	for range 2 { // idempotent
		_, err = db.ExecContext(ctx, sql)
		require.NoError(t, err, sql)
		require.NoError(t, login(password))
		require.Error(t, login("alfred"), "the old password no longer works")
	}
	// A fresh machine: no role yet.
	_, err = db.ExecContext(ctx, "DROP ROLE "+role)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, sql)
	require.NoError(t, err)
	require.NoError(t, login(password))

	mk, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	require.Contains(t, string(mk), "ALFRED_TEST_DATABASE_URL ?= postgres://alfred:"+password+"@", "the Makefile uses the script's password")
	require.Empty(t, confusableDatabasePassword(t, password), "the configuration accepts the development password")
}

// confusableDatabasePassword returns the error config check prints for a database_url with
// password, "" when it loads.
func confusableDatabasePassword(t *testing.T, password string) string {
	t.Helper()
	r := runArgs(t, "config", "check", "--config", writeConfig(t, "postgres://alfred:"+password+"@db/alfred"))
	if r.code == 0 {
		return ""
	}
	return r.stderr
}
