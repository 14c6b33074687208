package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A database_url whose password holds a character a URL does not allow unescaped (a
// backslash, a double quote) fails to parse; the driver's error quotes the whole URL with Go's
// %q, which escapes that character. The censor knows that form of the database_url (it has no
// password of its own, since the URL does not parse): migrate, doctor and serve never print it.
func TestADatabaseURLThatDoesNotParseIsNeverShown(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"migrate"}, {"doctor"}, {"serve"}} {
		p := writeConfig(t, `postgres://alfred:pw\s3cr3t-9xq@127.0.0.1:1/alfred?sslmode=disable`)
		r := runArgs(t, append(cmd, "--config", p)...)
		require.Equal(t, 1, r.code, "%v: %s", cmd, r.stderr)
		assert.NotContains(t, r.stdout+r.stderr, "s3cr3t-9xq", "%v printed the database password:\n%s%s", cmd, r.stdout, r.stderr)
	}
}

// A secret written in the YAML file that YAML reads as something else (a value starting with
// "*" is an alias) fails the load; the error is printed before any censor exists, so it must
// never quote the value.
func TestAConfigParseErrorNeverQuotesASecret(t *testing.T) {
	t.Parallel()
	p := writeConfig(t, "postgres://alfred:pw-s3cr3t-x@db/alfred")
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	cfg := strings.Replace(string(raw), "token: tok-s3cr3t", "token: *tok-s3cr3t-9f2", 1)
	require.NotEqual(t, string(raw), cfg, "the test's configuration has the token to replace")
	require.NoError(t, os.WriteFile(p, []byte(cfg), 0o600))
	for _, cmd := range [][]string{{"config", "check"}, {"serve"}} {
		r := runArgs(t, append(cmd, "--config", p)...)
		require.Equal(t, 1, r.code, "%v", cmd)
		require.Contains(t, r.stderr, "could not find alias", "%v: the error still says what is wrong", cmd)
		require.NotContains(t, r.stdout+r.stderr, "s3cr3t-9f2", "%v", cmd)
	}
}
