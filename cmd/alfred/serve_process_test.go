package main

import (
	"bufio"
	"cmp"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveProcess is one `alfred serve` subprocess of a test, the one harness of the tests that
// run the binary as an operator would: the replicas (replicaSet) and the hand-over's, the
// throughput benchmark's replicas, and the process of the crash, exactly-once, hostile,
// discovery and rebuild tests. Its output is appended to its log file.
type serveProcess struct {
	name, addr, url, log string
	cmd                  *exec.Cmd
	// stopped is set once the test has stopped the process (stop, signal).
	stopped bool
}

// startServeProcess starts `bin serve --config cfgPath` listening on addr (the configuration's
// listen, or ALFRED_LISTEN in env), with env added to this process's environment
// ("ALFRED_DATABASE_URL=…"), its output appended to logPath, and waits until it answers
// /healthz (after its start-up recovery and reap). A process still running when the test ends
// is killed; if the test failed, the end of its log is printed.
func startServeProcess(tb testing.TB, name, bin, cfgPath, logPath, addr string, env ...string) *serveProcess {
	tb.Helper()
	return launchServeProcess(tb, "/healthz", name, bin, cfgPath, logPath, addr, env...)
}

// startServeProcessReady is startServeProcess waiting for /readyz instead: the process takes
// deliveries (its store open, its rebuild from the forge done).
func startServeProcessReady(tb testing.TB, name, bin, cfgPath, logPath, addr string, env ...string) *serveProcess {
	tb.Helper()
	return launchServeProcess(tb, "/readyz", name, bin, cfgPath, logPath, addr, env...)
}

// serveLogPrinted bounds the log a failed test prints: its end, where the failure is.
const serveLogPrinted = 256 << 10

// launchServeProcess starts the process (startServeProcess) and waits until probe answers 200.
func launchServeProcess(tb testing.TB, probe, name, bin, cfgPath, logPath, addr string, env ...string) *serveProcess {
	tb.Helper()
	p := &serveProcess{name: name, addr: addr, url: "http://" + addr, log: logPath}
	p.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	p.cmd.Env = append(os.Environ(), env...)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(tb, err)
	defer logf.Close() // the child has its own descriptor
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	require.NoError(tb, p.cmd.Start())
	tb.Cleanup(func() {
		if !p.stopped {
			_ = p.cmd.Process.Kill()
			_, _ = p.cmd.Process.Wait()
		}
		if tb.Failed() {
			b, _ := os.ReadFile(logPath)
			tb.Logf("%s log (its last %d KiB):\n%s", name, serveLogPrinted>>10, b[max(0, len(b)-serveLogPrinted):])
		}
	})
	require.Eventually(tb, func() bool {
		resp, err := http.Get(p.url + probe)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, e2eWait, 50*time.Millisecond, "%s never answered %s (its log is printed at the end)", name, probe)
	return p
}

// kill ends the process with SIGKILL, as a crash would, and reaps it; a stopped process is
// left alone.
func (p *serveProcess) kill() {
	if p.stopped {
		return
	}
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	p.stopped = true
}

// signal sends sig to the process and waits until it has exited.
func (p *serveProcess) signal(tb testing.TB, sig os.Signal) *os.ProcessState {
	tb.Helper()
	require.NoError(tb, p.cmd.Process.Signal(sig))
	st, err := p.cmd.Process.Wait()
	require.NoError(tb, err)
	p.stopped = true
	return st
}

// stop ends the process with SIGTERM (a clean shutdown: its leases released) and waits; it
// fails the test unless the process exits 0 within two minutes. A stopped process is left
// alone.
func (p *serveProcess) stop(tb testing.TB) {
	tb.Helper()
	if p.stopped {
		return
	}
	require.NoError(tb, p.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := p.cmd.Process.Wait()
		done <- st
	}()
	select {
	case st := <-done:
		p.stopped = true
		require.True(tb, st != nil && st.Success(), "%s: a clean shutdown exits 0 (%v); its log: %s", p.name, st, p.tail())
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-done
		p.stopped = true
		tb.Fatalf("%s did not stop on SIGTERM; its log: %s", p.name, p.tail())
	}
}

// text is the process's log so far.
func (p *serveProcess) text(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(p.log)
	require.NoError(tb, err)
	return string(b)
}

// count returns how many lines of the process's log contain s.
func (p *serveProcess) count(tb testing.TB, s string) int {
	tb.Helper()
	f, err := os.Open(p.log)
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

// tail is the end of the process's log.
func (p *serveProcess) tail() string {
	out, _ := os.ReadFile(p.log)
	return string(out[max(0, len(out)-4000):])
}

// serveConfig is the configuration of an `alfred serve` that the crash, kill matrix,
// hand-over and replica tests run against a Forgejo stand-in (repository owner and bot
// account "bot", the webhook secret liveSecret): one agent for every phase, a short CI
// poll, workers polling every 100 ms. The tests differ only in the fields below.
type serveConfig struct {
	listen, dataDir string
	// forgeURL and forgeToken reach the stand-in (or a proxy in front of it).
	forgeURL, forgeToken string
	// image is the agent's image. script, when set, is the script agent's script file;
	// otherwise the agent is the stand-in claude-code CLI with a test key.
	image, script string
	// ciWait is lifecycle.ci_wait (a Go duration).
	ciWait string
	// workers is workers.count (2 when 0); runs is workers.runs (the default when 0);
	// leaseTTL is workers.lease_ttl, with leaseWhy, when set, the reason as a YAML comment.
	workers, runs int
	leaseTTL      string
	leaseWhy      string
	runner        string // the runner section ("runner: …"), "" for the defaults
}

// yaml renders the configuration.
func (c serveConfig) yaml() string {
	agent := fmt.Sprintf("{name: claude, adapter: claude-code, image: %s, api_key: sk-test-key-1234567890}", c.image)
	name := "claude"
	if c.script != "" {
		agent = fmt.Sprintf("{name: script, adapter: script, image: %s, script: %s}", c.image, c.script)
		name = "script"
	}
	workers := fmt.Sprintf("count: %d", cmp.Or(c.workers, 2))
	if c.runs > 0 {
		workers += fmt.Sprintf(", runs: %d", c.runs)
	}
	lease := ""
	if c.leaseWhy != "" {
		lease = "  # " + c.leaseWhy
	}
	return fmt.Sprintf(`
listen: %s
data_dir: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token: %s, webhook_secret: %s, bot_user: bot}
agents:
  - %s
phases: {default: %s}
lifecycle: {ci_wait: %s, ci_poll: 300ms}
workers: {%s, lease_ttl: %s, poll_interval: 100ms}%s
%s
`, c.listen, c.dataDir, c.forgeURL, c.forgeToken, liveSecret, agent, name, c.ciWait, workers, c.leaseTTL, lease, c.runner)
}

// write writes the configuration to path.
func (c serveConfig) write(tb testing.TB, path string) {
	tb.Helper()
	require.NoError(tb, os.WriteFile(path, []byte(c.yaml()), 0o600))
}
