package runfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadRefusesHostileFiles: every kind of hostile file is refused with its reason, without
// blocking (a FIFO with no writer would block a plain open forever), and the files Alfred's
// own directories hold never come back.
func TestReadRefusesHostileFiles(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	secret := filepath.Join(outside, "alfred.yaml")
	require.NoError(t, os.WriteFile(secret, []byte("forge_token: s3cr3t\n"), 0o600))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.json"), []byte(`{"ok":true}`), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("inner"), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "abs-link")))
	require.NoError(t, os.Symlink("../"+filepath.Base(outside)+"/alfred.yaml", filepath.Join(dir, "rel-link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "dir-link")))
	require.NoError(t, os.Symlink("/nonexistent/x", filepath.Join(dir, "dangling-out")))
	require.NoError(t, os.Symlink("ok.json", filepath.Join(dir, "inner-link")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "dev-link")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), []byte(strings.Repeat("x", 101)), 0o644))
	if os.Geteuid() == 0 { // a character device (1, 5 is /dev/zero): needs CAP_MKNOD
		require.NoError(t, syscall.Mknod(filepath.Join(dir, "zero"), syscall.S_IFCHR|0o666, 1<<8|5))
	}

	for name, want := range map[string]string{
		"abs-link":             ReasonLink,
		"rel-link":             ReasonLink,
		"dir-link/alfred.yaml": ReasonLink,
		"dangling-out":         ReasonLink,
		"dev-link":             ReasonLink,
		"fifo":                 ReasonNotRegular,
		"sub":                  ReasonNotRegular,
		"big":                  ReasonTooLarge,
	} {
		b, err := Read(dir, name, 100)
		require.ErrorIs(t, err, ErrRefused, name)
		require.Equal(t, want, Reason(err), name)
		require.Nil(t, b, name)
		require.NotContains(t, err.Error(), "s3cr3t")
	}
	if os.Geteuid() == 0 {
		_, err := Read(dir, "zero", 100)
		require.Equal(t, ReasonNotRegular, Reason(err))
		require.Contains(t, err.Error(), "a device")
	}

	_, err := Read(dir, "missing", 100)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Empty(t, Reason(err))
	for name, want := range map[string]string{"ok.json": `{"ok":true}`, "inner-link": `{"ok":true}`, "sub/f": "inner"} {
		b, err := Read(dir, name, 100)
		require.NoError(t, err, name)
		require.Equal(t, want, string(b))
	}
	b, err := Read(dir, "big", 101)
	require.NoError(t, err)
	require.Len(t, b, 101)
	b, cut, err := ReadHead(dir, "big", 10)
	require.NoError(t, err)
	require.True(t, cut)
	require.Equal(t, "xxxxxxxxxx", string(b))
	_, _, err = ReadHead(dir, "abs-link", 10)
	require.Equal(t, ReasonLink, Reason(err))
}

// TestReadDeadline: a read that does not finish within its deadline (a stuck filesystem; here a
// pipe nobody writes to) is refused with ReasonDeadline instead of holding the caller.
func TestReadDeadline(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	_, err = readWithin(r, "stuck", 10, 50*time.Millisecond)
	require.Equal(t, ReasonDeadline, Reason(err))
}
