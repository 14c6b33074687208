package gitrepo

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Error is a failed git command: its arguments (never secret), redacted stderr and exit error.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

// Error formats "git <args>: <err>: <stderr>".
func (e *Error) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, e.Stderr)
}

// Unwrap returns the exec error (an *exec.ExitError for a non-zero exit).
func (e *Error) Unwrap() error { return e.Err }

func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}
