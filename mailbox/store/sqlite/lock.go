package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// acquireLock opens (creating) the lock file and takes an exclusive, non-blocking flock(2) on
// it. The lock lives as long as the returned file is open; closing the file, or the end of the
// process, releases it.
func acquireLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the database lock %s: %w", path, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
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
