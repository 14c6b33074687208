package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The hostile findings at the HTTP edge, the doctor and the pages (spec/edge.md, "Slow
// clients", spec/operations.md): each test drives the command as an operator or an attacker
// would.

// runCaught is runArgs with a panic of the command reported as a failure instead of ending the
// test binary.
func runCaught(t *testing.T, args ...string) (r result) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("alfred %v panicked: %v", args, p)
		}
	}()
	return runArgs(t, args...)
}

// TestDoctorUnreachableDatabase: with a database that cannot be opened (nothing listens on the
// port) the doctor prints the failed database check with its fix and exits 1, without a panic.
func TestDoctorUnreachableDatabase(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "postgres://alfred:alfred@127.0.0.1:1/alfred?sslmode=disable&connect_timeout=5")
	r := runCaught(t, "doctor", "--config", cfg)
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "[FAIL] database: ")
	require.Contains(t, r.stdout, "fix: start PostgreSQL")
	require.NotContains(t, r.stdout+r.stderr, "panic")
	require.NotContains(t, r.stdout+r.stderr, "s3cr3t")
	t.Logf("alfred doctor:\n%s", r.stdout)
}
