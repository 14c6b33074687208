package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockWait bounds how long acquireLock retries a held lock. A process that holds the database
// holds it for its lifetime, so the wait only covers a short, legitimate hold: between fork and
// exec a child of this process (git, a test's subprocess) shares every open file, the lock
// file included, until exec closes it.
const lockWait = 500 * time.Millisecond

// acquireLock opens (creating) the lock file and takes an exclusive flock(2) on it, retrying
// for up to lockWait while it is held. The lock lives as long as the returned file is open;
// closing the file, or the end of the process, releases it.
func acquireLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the database lock %s: %w", path, err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s is held. A SQLite database serves one Alfred process; "+
			"stop the other one, or set database_url to a postgres:// URL to run several replicas on PostgreSQL",
			ErrLocked, path)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
