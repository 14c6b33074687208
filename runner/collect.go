package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/internal/base/textwalk"
	"github.com/alfred-bot/alfred/runner/phase"
)

// collection is one run container to finish: the one Run started, or one Reattach adopted.
type collection struct {
	h      Handle
	agent  Agent
	in     phase.Input
	outDir string // host side of OutputDir
	// wait bounds the wait for the exit; 0 waits without a bound (a container that has already
	// exited). limit is the run's time limit, named in the ErrTimeout error.
	wait, limit time.Duration
	life        *containerLife
}

// collect is the one path that finishes a run container, shared by a live run (Run) and a
// reattached one (Reattach). It waits for the exit within c.wait, renewing the container
// record's heartbeat meanwhile, then fills out:
//
//   - the wait ended by its bound: the container is stopped (Exit.Killed), StatusTimedOut with
//     ErrTimeout; the logs are kept, no result is read;
//   - the wait ended by ctx: stopped the same way, StatusCanceled with the ctx error; but a ctx
//     cancelled with cause phase.ErrDetach (shutdown) leaves the container running, unread:
//     StatusDetached;
//   - the Runtime failed while waiting: the error, nothing else read;
//   - the logs cannot be read: the error, out.Status left empty and no result read. A run
//     whose output cannot be read is an infrastructure failure (the Docker engine), never an
//     agent failure, whichever path collects it;
//   - otherwise the adapter reads the result from the exit, the logs and the output directory:
//     StatusSucceeded with out.Result, or StatusFailed with the adapter's error in out.Err.
//
// The logs kept in out are redacted, made storable (textwalk.Storable) and capped to
// Config.MaxOutputBytes (tail kept); out.Err's text passes the censor too.
func (e *Executor) collect(ctx context.Context, c collection, out *RunOutcome) error {
	defer func() {
		if out.Err != nil {
			// An agent's output can be in it (an invalid result quotes it): stored and shown.
			out.Err = &censoredError{err: out.Err, msg: textwalk.Storable(e.cfg.Redact(out.Err.Error()))}
		}
	}()
	stopBeat := c.life.heartbeat(ctx)
	waitCtx, cancelWait := ctx, context.CancelFunc(func() {})
	if c.wait > 0 {
		waitCtx, cancelWait = context.WithTimeout(ctx, c.wait)
	}
	exit, waitErr := e.cfg.Runtime.Wait(waitCtx, c.h.ID)
	cancelWait()
	stopBeat()
	out.Duration = time.Since(out.Started)
	if waitErr != nil {
		switch {
		case waitCtx.Err() == nil:
			return waitErr
		case ctx.Err() != nil && errors.Is(context.Cause(ctx), phase.ErrDetach):
			out.Status, out.Err = StatusDetached, context.Cause(ctx)
			return nil // left running, unread: the next process collects it
		case ctx.Err() != nil:
			out.Status, out.Err = StatusCanceled, ctx.Err()
		default:
			out.Status, out.Err = StatusTimedOut, fmt.Errorf("%w after %s", ErrTimeout, c.limit)
		}
		exit = e.stop(ctx, c.h.ID)
		out.Duration = time.Since(out.Started)
	}
	out.Exit = exit

	lctx, cancelLogs := e.cleanupCtx(ctx)
	stdout, stderr, logErr := e.cfg.Runtime.Logs(lctx, c.h.ID)
	cancelLogs()
	out.Stdout, out.StdoutTruncated = tail(textwalk.Storable(RedactLogs(stdout, e.cfg.Redact)), e.cfg.MaxOutputBytes)
	out.Stderr, out.StderrTruncated = tail(textwalk.Storable(RedactLogs(stderr, e.cfg.Redact)), e.cfg.MaxOutputBytes)
	e.noteEgress(c.h.ID, out)
	out.LogsDropped = LogDropped(stdout) + LogDropped(stderr)
	if out.Status != "" { // timed out or canceled: no result is read
		return nil
	}
	if logErr != nil {
		return fmt.Errorf("read the container's logs: %w", logErr)
	}
	res, err := agentResult(c.agent, c.in, exit, stdout, stderr, c.outDir)
	if err != nil {
		out.Status, out.Err = StatusFailed, err
		return nil
	}
	// Every text of the result (summary, plan, answer, analysis, commit message, files) is
	// posted, stored or committed: it passes the censor here, once, for every path, and is made
	// storable and committable (no NUL, valid UTF-8).
	textwalk.Map(res, func(s string) string { return textwalk.Storable(e.cfg.Redact(s)) })
	out.Status, out.Result = StatusSucceeded, res
	return nil
}

// stop stops the container on a fresh bounded context and returns its exit state, Killed set.
func (e *Executor) stop(ctx context.Context, id ContainerID) ExitState {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+e.cfg.StopGrace)
	defer cancel()
	stopErr := e.cfg.Runtime.Stop(cctx, id, e.cfg.StopGrace)
	st, waitErr := e.cfg.Runtime.Wait(cctx, id)
	if err := errors.Join(stopErr, waitErr); err != nil {
		st.Error = err.Error()
	}
	st.Killed = true
	return st
}

// cleanupCtx returns ctx itself while it is live, else a fresh context bounded by cleanupTimeout.
func (e *Executor) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// tail returns the last max bytes of s (cut at a UTF-8 boundary, behind a marker line) and
// whether anything was dropped.
func tail(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	cut := len(s) - max
	for cut < len(s) && cut > 0 && !isRuneStart(s[cut]) {
		cut++
	}
	return fmt.Sprintf("[… %d bytes truncated …]\n", cut) + s[cut:], true
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// noteEgress records what the run's egress proxy refused (a Runtime that is an EgressReporter)
// in out.EgressRefused and as a last line of out.Stderr, which the run's record keeps.
func (e *Executor) noteEgress(id ContainerID, out *RunOutcome) {
	er, ok := e.cfg.Runtime.(EgressReporter)
	if !ok {
		return
	}
	refused := er.EgressRefused(id)
	if len(refused) == 0 {
		return
	}
	out.EgressRefused = refused
	if out.Stderr != "" && !strings.HasSuffix(out.Stderr, "\n") {
		out.Stderr += "\n"
	}
	out.Stderr += e.cfg.Redact(EgressRefusedLine+strings.Join(refused, ", ")) + "\n"
}

// EgressRefusedLine begins the line a run's output ends with when its egress proxy refused a
// destination: "alfred: egress refused (not on runner.egress.allow): host:port, …".
const EgressRefusedLine = "alfred: egress refused (not on runner.egress.allow): "
