// Package runfile reads what a run left behind as hostile input: the result file, an adapter's
// files, a worktree's files after an agent ran in it. An agent that follows a prompt injection
// can leave a symbolic link there (to make Alfred read its own configuration or store), a FIFO
// or a device (to make the reader block and hold a worker), or a file of gigabytes. Read
// refuses each of these with a RefusedError that names the reason:
//
//   - the file is opened through an os.Root on the run's directory, so no symbolic link (of the
//     file or of a directory on its way) leads out of it (ReasonLink);
//   - only a regular file is opened: the kind is checked through the root before the open, the
//     open does not block (O_NONBLOCK), and the opened file must be the one checked
//     (ReasonNotRegular);
//   - the caller bounds the size per kind of file (ReasonTooLarge);
//   - the read has a deadline, Deadline (ReasonDeadline).
//
// It imports nothing of Alfred's: runner, runner/gitrepo, the adapters and internal/metrics
// use it.
package runfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"
)

// The reasons of a RefusedError, the values of the reason label of
// alfred_hostile_output_total.
const (
	// ReasonLink: the name, or a directory on its way, is a symbolic link leading out of the
	// run's directory.
	ReasonLink = "link"
	// ReasonNotRegular: the name is a FIFO, a device, a socket or a directory.
	ReasonNotRegular = "not_regular"
	// ReasonTooLarge: the file is larger than the bound of its kind.
	ReasonTooLarge = "too_large"
	// ReasonDeadline: reading the file took longer than Deadline.
	ReasonDeadline = "deadline"
	// ReasonLogFlood: the run's logs were larger than their bound; head and tail were kept
	// (runner, not Read).
	ReasonLogFlood = "log_flood"
	// ReasonNestedRepository: the run left a repository inside the worktree (a .git below its
	// root), whose configuration git would run as Alfred (runner/gitrepo).
	ReasonNestedRepository = "nested_repository"
)

// Deadline bounds one Read: a regular file of the bounded size is read in far less; a read
// that takes longer (a stuck network filesystem) is abandoned.
const Deadline = 10 * time.Second

// ErrRefused matches every *RefusedError (errors.Is).
var ErrRefused = errors.New("hostile run output refused")

// RefusedError is a file of a run Read refused to read: Name (relative to the run's
// directory), Reason (one of the Reason constants) and words fit for the run's page.
type RefusedError struct {
	Name   string
	Reason string
	Detail string
}

// Error formats "refused <name>: <detail>".
func (e *RefusedError) Error() string { return "refused " + e.Name + ": " + e.Detail }

// Is matches ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Reason returns the reason of the first *RefusedError in err's chain, "" when there is none.
func Reason(err error) string {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

// Read returns the content of name (slash-separated, relative to dir) when it is a regular
// file inside dir of at most max bytes. dir is Alfred's own path (a run's output directory, a
// worktree); name is what the run controls.
//
// Errors: a missing name wraps fs.ErrNotExist; a refusal is a *RefusedError (errors.Is
// ErrRefused); any other failure to open or read the file.
func Read(dir, name string, max int64) ([]byte, error) {
	return open(dir, name, max, false)
}

// ReadHead is Read for a file whose head is enough (a file shown to an agent): a file larger
// than max is not refused, its first max bytes are returned with cut true.
func ReadHead(dir, name string, max int64) (b []byte, cut bool, err error) {
	b, err = open(dir, name, max, true)
	if int64(len(b)) > max {
		return b[:max], true, nil
	}
	return b, false, err
}

// open reads name as Read does; with head, a larger file is not refused and up to max+1
// bytes are returned.
func open(dir, name string, max int64, head bool) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	st, err := root.Stat(name)
	if err != nil {
		if linkOnPath(root, name) && !errors.Is(err, fs.ErrNotExist) {
			return nil, &RefusedError{Name: name, Reason: ReasonLink,
				Detail: "it is a symbolic link leading out of the run's directory"}
		}
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &RefusedError{Name: name, Reason: ReasonNotRegular,
			Detail: fmt.Sprintf("it is not a regular file (%s)", kind(st.Mode()))}
	}
	if st.Size() > max && !head {
		return nil, tooLarge(name, max)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	opened, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !opened.Mode().IsRegular() || !os.SameFile(st, opened) {
		_ = f.Close()
		return nil, &RefusedError{Name: name, Reason: ReasonNotRegular,
			Detail: "it was replaced while being opened"}
	}
	b, err := readWithin(f, name, max, Deadline)
	switch {
	case head && Reason(err) == ReasonTooLarge:
		return b, nil
	case err != nil:
		return nil, err
	}
	return b, nil
}

// readWithin reads at most max+1 bytes of f and closes it (more than max: the bytes with a
// ReasonTooLarge refusal); after deadline it closes f and
// returns a ReasonDeadline refusal (the reading goroutine ends with the close, or with the
// stuck read).
func readWithin(f io.ReadCloser, name string, max int64, deadline time.Duration) ([]byte, error) {
	type done struct {
		b   []byte
		err error
	}
	ch := make(chan done, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(f, max+1))
		ch <- done{b, err}
	}()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	select {
	case d := <-ch:
		_ = f.Close()
		if d.err != nil {
			return nil, fmt.Errorf("read %s: %w", name, d.err)
		}
		if int64(len(d.b)) > max {
			return d.b, tooLarge(name, max)
		}
		return d.b, nil
	case <-timer.C:
		_ = f.Close()
		return nil, &RefusedError{Name: name, Reason: ReasonDeadline,
			Detail: fmt.Sprintf("reading it took longer than %s", deadline)}
	}
}

func tooLarge(name string, max int64) *RefusedError {
	return &RefusedError{Name: name, Reason: ReasonTooLarge, Detail: fmt.Sprintf("it is larger than %d bytes", max)}
}

// linkOnPath reports whether name or a directory on its way is a symbolic link.
func linkOnPath(root *os.Root, name string) bool {
	p := path.Clean(strings.TrimPrefix(name, "/"))
	for {
		if st, err := root.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return true
		}
		parent := path.Dir(p)
		if parent == p || parent == "." {
			return false
		}
		p = parent
	}
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return m.Type().String()
}
