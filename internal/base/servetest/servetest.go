// Package servetest runs the `alfred serve` binary as a test's subprocess, as an operator
// would: built once per test process, or once for the whole of `make test` and handed to every
// test process (Binary, EnvBinary), started with its output in a log file, waited for until it
// answers, stopped, killed or signalled by the test, killed when the test ends, and the end of
// its log printed once if the test failed. It is the one harness of the tests and benchmarks
// that run the binary (cmd/alfred's crash, hand-over, replica, exactly-once, hostile, discovery
// and rebuild tests; webhook's ingest benchmarks; the deploy test's doctor and image). It
// imports nothing of Alfred's: it builds the binary with `go build`.
package servetest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Package is the import path of the binary Binary builds.
const Package = "github.com/alfred-bot/alfred/cmd/alfred"

// The probes Start can wait for: Healthz answers once the process has done its start-up
// recovery; Readyz once it takes deliveries (its store open, its rebuild from the forge done).
// NoProbe does not wait: the test waits on a signal of its own (a log line).
const (
	Healthz = "/healthz"
	Readyz  = "/readyz"
	NoProbe = ""
)

// Wait is the most Start waits for its probe, and Stop for a clean exit: a bound for a hang,
// not a measure of speed (a loaded 2-core machine has taken over a minute).
const Wait = 5 * time.Minute

// LogPrinted bounds the log a failed test prints: its end, where the failure is.
const LogPrinted = 256 << 10

// EnvBinary names the environment variable through which a binary built beforehand is handed
// to every test process: `make test` builds cmd/alfred once (bin/alfred-test, as Binary builds
// it) and sets it, so that the packages that run the binary do not each link their own. Unset,
// Binary builds one per test process.
const EnvBinary = "ALFRED_TEST_BINARY"

// binary is Package built once per test process, or the file EnvBinary names.
var binary struct {
	once      sync.Once
	dir, path string
	out       []byte
	err       error
}

// Binary returns the path of the alfred binary: the file EnvBinary names if it is set, else
// Package built once per test process on the first call. It is built static (CGO_ENABLED=0),
// so that the same file runs in the deploy test's Debian image (scripts/alfred-image.sh's
// ALFRED_BINARY), and without DWARF tables (-ldflags=-w, about a third of a link's CPU, which
// nobody reads here); `make test` compiles the tests with CGO_ENABLED=0 too, so that both share
// the build cache's packages. It is shared: no test writes to it. A package's TestMain calls
// RemoveBinary at the end. It fails the test if EnvBinary names no regular, executable file, or
// if the build fails.
func Binary(tb testing.TB) string {
	tb.Helper()
	binary.once.Do(func() {
		if path := os.Getenv(EnvBinary); path != "" {
			binary.path, binary.err = handed(path)
			return
		}
		binary.dir, binary.err = os.MkdirTemp("", "alfred-bin-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "alfred")
		cmd := exec.Command("go", "build", "-ldflags=-w", "-o", binary.path, Package)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		binary.out, binary.err = cmd.CombinedOutput()
	})
	require.NoError(tb, binary.err, "build %s: %s", Package, binary.out)
	return binary.path
}

// handed checks the binary EnvBinary names: an absolute path (a test process runs in its
// package's directory, so a relative one would name a different file in each), a regular file,
// executable.
func handed(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%s=%s: not an absolute path", EnvBinary, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvBinary, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s=%s: not an executable file (%s)", EnvBinary, path, fi.Mode())
	}
	return path, nil
}

// RemoveBinary removes what Binary built (never the file EnvBinary names); TestMain calls it
// once the tests have run.
func RemoveBinary() {
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
}

// Process is one `alfred serve` subprocess of a test. Its output is appended to its log file.
type Process struct {
	// Name names the process in failures and in the printed log ("replica-a").
	Name string
	// Addr is its webhook listener (host:port), and URL "http://" + Addr.
	Addr, URL string
	// Log is the path of its log file.
	Log string
	// Cmd is the running command.
	Cmd *exec.Cmd
	// stopped is set once the test has ended the process (Stop, Signal, Kill).
	stopped bool
}

// printed remembers the log files a failed test has printed, so that a test whose processes
// share one log (a process started again on the same file) prints it once.
var printed sync.Map // printedLog → struct{}

// printedLog is a key of printed: a test and a log file.
type printedLog struct {
	tb  testing.TB
	log string
}

// Start starts `bin serve --config cfgPath` listening on addr (the configuration's listen, or
// ALFRED_LISTEN in env), with env added to this process's environment
// ("ALFRED_DATABASE_URL=…"), its output appended to logPath, and waits until probe (Healthz,
// Readyz) answers 200, at most Wait; NoProbe does not wait. A process still running when the
// test ends is killed; if the test failed, the last LogPrinted bytes of its log are printed.
func Start(tb testing.TB, probe, name, bin, cfgPath, logPath, addr string, env ...string) *Process {
	tb.Helper()
	p := &Process{Name: name, Addr: addr, URL: "http://" + addr, Log: logPath}
	p.Cmd = exec.Command(bin, "serve", "--config", cfgPath)
	p.Cmd.Env = append(os.Environ(), env...)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(tb, err)
	defer logf.Close() // the child has its own descriptor
	p.Cmd.Stdout, p.Cmd.Stderr = logf, logf
	require.NoError(tb, p.Cmd.Start())
	tb.Cleanup(func() {
		p.Kill()
		if _, done := printed.LoadOrStore(printedLog{tb, logPath}, struct{}{}); tb.Failed() && !done {
			b, _ := os.ReadFile(logPath)
			tb.Logf("%s log (its last %d KiB):\n%s", name, LogPrinted>>10, b[max(0, len(b)-LogPrinted):])
		}
	})
	if probe == NoProbe {
		return p
	}
	require.Eventually(tb, func() bool {
		resp, err := http.Get(p.URL + probe)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, Wait, 50*time.Millisecond, "%s never answered %s (its log is printed at the end)", name, probe)
	return p
}

// Kill ends the process with SIGKILL, as a crash would, and reaps it; an ended process is left
// alone.
func (p *Process) Kill() {
	if p.stopped {
		return
	}
	_ = p.Cmd.Process.Kill()
	_, _ = p.Cmd.Process.Wait()
	p.stopped = true
}

// Signal sends sig to the process and waits until it has exited.
func (p *Process) Signal(tb testing.TB, sig os.Signal) *os.ProcessState {
	tb.Helper()
	require.NoError(tb, p.Cmd.Process.Signal(sig))
	st, err := p.Cmd.Process.Wait()
	require.NoError(tb, err)
	p.stopped = true
	return st
}

// Stop ends the process with SIGTERM (a clean shutdown: its leases released) and waits; it
// fails the test unless the process exits 0 within Wait. An ended process is left alone.
func (p *Process) Stop(tb testing.TB) {
	tb.Helper()
	if p.stopped {
		return
	}
	require.NoError(tb, p.Cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := p.Cmd.Process.Wait()
		done <- st
	}()
	select {
	case st := <-done:
		p.stopped = true
		require.True(tb, st != nil && st.Success(), "%s: a clean shutdown exits 0 (%v); its log: %s", p.Name, st, p.Tail())
	case <-time.After(Wait):
		_ = p.Cmd.Process.Kill()
		<-done
		p.stopped = true
		tb.Fatalf("%s did not stop on SIGTERM; its log: %s", p.Name, p.Tail())
	}
}

// Text is the process's log so far.
func (p *Process) Text(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(p.Log)
	require.NoError(tb, err)
	return string(b)
}

// Count returns how many lines of the process's log contain s.
func (p *Process) Count(tb testing.TB, s string) int {
	tb.Helper()
	f, err := os.Open(p.Log)
	require.NoError(tb, err)
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			n++
		}
	}
	require.NoError(tb, sc.Err())
	return n
}

// Tail is the end of the process's log (4,000 bytes).
func (p *Process) Tail() string {
	out, _ := os.ReadFile(p.Log)
	return string(out[max(0, len(out)-4000):])
}
