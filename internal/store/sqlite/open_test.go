package sqlite_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlite"
)

// lockHelperEnv makes the test binary, run again as a child process, open the database named
// by the variable and report on stdout.
const lockHelperEnv = "ALFRED_SQLITE_LOCK_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(lockHelperEnv); path != "" {
		db, err := sqlite.OpenDB(context.Background(), path)
		if err != nil {
			_, _ = os.Stdout.WriteString("open failed: " + err.Error() + "\n")
			os.Exit(3)
		}
		_, _ = os.Stdout.WriteString("opened\n")
		// Hold the database until stdin closes (the parent ends us).
		_, _ = os.Stdin.Read(make([]byte, 1))
		_ = db.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestOpenSetsWALForeignKeysAndAppliesMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data", "alfred.db") // the directory is created
	db, err := sqlite.OpenDB(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	for _, f := range []string{path, path + "-wal"} {
		info, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "%s is the owner's only", f)
	}
	var mode string
	require.NoError(t, db.GetContext(ctx, &mode, `PRAGMA journal_mode`))
	require.Equal(t, "wal", mode)
	var fk, busy int
	require.NoError(t, db.GetContext(ctx, &fk, `PRAGMA foreign_keys`))
	require.Equal(t, 1, fk)
	require.NoError(t, db.GetContext(ctx, &busy, `PRAGMA busy_timeout`))
	require.Equal(t, sqlite.BusyTimeoutMS, busy)
	var n int
	require.NoError(t, db.GetContext(ctx, &n, `SELECT count(*) FROM mailboxes`))
	require.Equal(t, 1, db.Stats().MaxOpenConnections, "one writer")
}

// Times are stored as INTEGER Unix microseconds in UTC and read back as time.Time, so ordering
// in SQL is numeric and a round trip keeps the instant to the microsecond.
func TestTimesAreIntegerMicroseconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.OpenDB(ctx, filepath.Join(t.TempDir(), "alfred.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	at := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.FixedZone("CET", 3600))
	_, err = db.ExecContext(ctx, `INSERT INTO mailboxes (forge, repo, number, wake_at) VALUES ('f', 'r', 1, $1)`, at)
	require.NoError(t, err)
	var row struct {
		WakeAt  time.Time `db:"wake_at"`
		Kind    string    `db:"kind"`
		Raw     int64     `db:"raw"`
		Created time.Time `db:"created_at"`
	}
	require.NoError(t, db.GetContext(ctx, &row, `SELECT wake_at, typeof(wake_at) AS kind, wake_at + 0 AS raw, created_at FROM mailboxes`))
	require.Equal(t, "integer", row.Kind)
	require.Equal(t, at.UnixMicro(), row.Raw)
	require.True(t, row.WakeAt.Equal(at.Truncate(time.Microsecond)), "got %s", row.WakeAt)
	require.WithinDuration(t, time.Now(), row.Created, time.Minute, "the column default is now, in microseconds")
}

// Not parallel, like TestSecondProcessIsRefused, so that no process forked by another test
// shares the lock file while this one checks that Close released it.
func TestSecondOpenIsRefusedUntilClosed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alfred.db")
	first, err := sqlite.OpenDB(ctx, path)
	require.NoError(t, err)

	_, err = sqlite.OpenDB(ctx, path)
	require.ErrorIs(t, err, sqlite.ErrLocked)
	require.ErrorContains(t, err, "postgres://")

	require.NoError(t, first.Close())
	again, err := sqlite.OpenDB(ctx, path)
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// A second process is refused while the first holds the database, and may open it once the
// first has been killed (the kernel drops the lock with the process).
func TestSecondProcessIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alfred.db")
	self, err := os.Executable()
	require.NoError(t, err)

	holder := exec.Command(self, "-test.run=^$")
	holder.Env = append(os.Environ(), lockHelperEnv+"="+path)
	stdin, err := holder.StdinPipe()
	require.NoError(t, err)
	stdout, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	line := make([]byte, len("opened\n"))
	_, err = stdout.Read(line) // the signal: the holder has the database open
	require.NoError(t, err)
	require.Equal(t, "opened\n", string(line))

	second := exec.Command(self, "-test.run=^$")
	second.Env = append(os.Environ(), lockHelperEnv+"="+path)
	out, err := second.Output()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 3, exit.ExitCode())
	require.Contains(t, string(out), "in use by another process")
	require.Contains(t, string(out), "PostgreSQL")

	require.NoError(t, holder.Process.Kill())
	_ = holder.Wait()
	_ = stdin.Close()
	db, err := sqlite.OpenDB(context.Background(), path)
	require.NoError(t, err, "the lock goes with the killed process")
	require.NoError(t, db.Close())
}

// OpenExisting never creates a database: a missing file (or directory) is ErrNoDatabase and
// nothing is left behind; an existing database opens.
func TestOpenExistingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data", "alfred.db")
	_, err := sqlite.OpenExisting(context.Background(), path, nil)
	require.ErrorIs(t, err, sqlite.ErrNoDatabase)
	_, err = os.Stat(filepath.Join(dir, "data"))
	require.ErrorIs(t, err, os.ErrNotExist, "not even the directory")

	st, err := sqlite.Open(context.Background(), path, nil)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	st, err = sqlite.OpenExisting(context.Background(), path, nil)
	require.NoError(t, err)
	require.NoError(t, st.Ping(context.Background()))
	require.NoError(t, st.Close())
}
