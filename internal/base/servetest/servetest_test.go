package servetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHanded: the binary handed through EnvBinary is taken only as an absolute path to a regular,
// executable file; anything else is refused with the variable's name in the message.
func TestHanded(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "alfred")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("x"), 0o644))

	got, err := handed(exe)
	require.NoError(t, err)
	require.Equal(t, exe, got)

	for name, path := range map[string]string{
		"relative":       "bin/alfred-test",
		"missing":        filepath.Join(dir, "missing"),
		"not executable": plain,
		"a directory":    dir,
	} {
		_, err := handed(path)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), EnvBinary, name)
	}
}
