package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/alfred-bot/alfred/runner/phase"
)

// SessionConfig enables one agent session per mailbox in a Service.
type SessionConfig struct {
	// Store keeps llm_sessions and agent_installations.
	Store SessionStore
	// Dir holds the session state, one directory per (mailbox, adapter):
	// Dir/<mailbox>/<adapter>/, outside every worktree.
	Dir string
	// UID and GID own the state directories (the container user) when Alfred runs as root.
	UID, GID int
	// Host is the id of the data directory Dir is in (StateHost), recorded with every
	// session so that a replica on another data directory knows whose the state is; "" records
	// none.
	Host string
}

// sessionPlan is how one run uses the mailbox's session.
type sessionPlan struct {
	adapter  string
	caps     Capabilities
	dir      string
	in       phase.Input
	resumed  bool
	fallback string
	prev     *phase.SessionRecord
}

// stateMarker is written beside (not inside) a session directory after each completed run; the
// container cannot write it. A directory without it is half-written or foreign: not resumed.
func stateMarker(dir string) string { return dir + ".ok" }

// SessionDir returns the state directory of a mailbox's adapter.
func (c SessionConfig) SessionDir(mailboxID int64, adapter string) string {
	return filepath.Join(c.Dir, strconv.FormatInt(mailboxID, 10), adapter)
}

// plan decides between resuming and a fresh session. It returns nil when the run uses no
// session: no session name (setting off, merge-request mailbox), no session store, or an
// adapter without resumable sessions — exactly the behaviour without sessions.
func (s *Service) plan(ctx context.Context, job phase.Job) (*sessionPlan, error) {
	if job.SessionName == "" || s.sessions.Store == nil {
		return nil, nil
	}
	name, agent, ok := s.exec.Agent(job.Input)
	if !ok {
		return nil, nil
	}
	sa, ok := agent.(SessionAgent)
	if !ok || !sa.Capabilities().ResumableSessions || sa.Capabilities().SessionStatePath == "" {
		return nil, nil
	}
	p := &sessionPlan{adapter: name, caps: sa.Capabilities(), dir: s.sessions.SessionDir(job.MailboxID, name), in: job.Input}
	p.in.SessionName = job.SessionName
	verified, err := s.resumeVerified(ctx, name, sa, job.Input)
	if err != nil {
		return nil, err
	}
	prev, err := s.sessions.Store.LatestSession(ctx, job.MailboxID)
	if err != nil {
		return nil, err
	}
	switch {
	case prev == nil:
		p.fallback = s.firstSessionReason(ctx, job.MailboxID)
	case prev.Adapter != name:
		p.fallback = FallbackAdapterChanged
	case !verified:
		p.fallback = FallbackUnsupportedVersion
	case !stateComplete(p.dir, prev.NativeID):
		p.fallback = FallbackStateMissing
		if prev.StateHost != "" && s.sessions.Host != "" && prev.StateHost != s.sessions.Host {
			// Docker on several hosts: the previous run's replica kept the state in its own data
			// directory. Say so; the run goes on fresh (spec/sessions.md, "Replicas").
			p.fallback = FallbackStateElsewhere
			s.log.Warn(fmt.Sprintf("session state of mailbox %d is on replica %s, not here (%s): starting a fresh session",
				job.MailboxID, prev.StateHost, s.sessions.Host), "mailbox_id", job.MailboxID, "adapter", name,
				"state_host", prev.StateHost, "here", s.sessions.Host, "session", prev.NativeID)
		}
	default:
		p.in.SessionID, p.in.Resume, p.resumed, p.prev = prev.NativeID, true, true, prev
	}
	if !p.resumed {
		p.fresh(p.fallback)
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create session dir: %w", err)
	}
	if os.Geteuid() == 0 && s.sessions.UID > 0 {
		if err := os.Chown(p.dir, s.sessions.UID, s.sessions.GID); err != nil {
			return nil, fmt.Errorf("chown session dir: %w", err)
		}
	}
	return p, nil
}

// fresh switches the plan to a new session, with the reason it does not resume.
func (p *sessionPlan) fresh(reason string) {
	p.resumed, p.fallback, p.prev = false, reason, nil
	p.in.Resume, p.in.SessionID = false, ""
	if p.caps.CallerChosenID {
		p.in.SessionID = uuid.NewString()
	}
}

// stateComplete reports whether the session directory holds a completed session: it exists,
// is not empty, and its marker (written by Alfred after the last completed run) names id.
func stateComplete(dir, id string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return false
	}
	b, err := os.ReadFile(stateMarker(dir))
	return err == nil && strings.TrimSpace(string(b)) == id
}

// record writes the run's session row and, after a success, the state marker.
func (s *Service) record(ctx context.Context, job phase.Job, p *sessionPlan, out *RunOutcome) *phase.SessionRecord {
	rec := &phase.SessionRecord{MailboxID: job.MailboxID, Adapter: p.adapter, Model: job.Input.Model,
		Name: job.SessionName, NativeID: p.in.SessionID, Resumed: p.resumed, FallbackReason: p.fallback,
		StateHost: s.sessions.Host}
	if job.RunID != 0 {
		id := job.RunID
		rec.RunID = &id
	}
	if out != nil {
		rec.DurationMS = out.Duration.Milliseconds()
		rec.Succeeded = out.Status == StatusSucceeded
		if r := out.Result; r != nil {
			if r.SessionID != "" {
				rec.NativeID = r.SessionID // as the CLI's stream reported it
			}
			rec.ReportedIn, rec.ReportedOut, rec.ReportedCost = r.InputTokens, r.OutputTokens, r.CostUSD
			var prev phase.Result // the session's usage before this run, as the CLI reported it
			if p.resumed && p.prev != nil {
				prev = phase.Result{SessionID: p.prev.NativeID, InputTokens: p.prev.ReportedIn,
					OutputTokens: p.prev.ReportedOut, CostUSD: p.prev.ReportedCost}
			}
			cur := *r
			cur.SessionID = rec.NativeID
			// On CLIs that sum over the whole session after a resume, keep this run's share.
			rec.TokensIn, rec.TokensOut, rec.CostUSD = UsageDelta(prev, cur, p.caps.CumulativeUsage && p.resumed && p.prev != nil)
		}
	}
	if err := s.sessions.Store.RecordSession(context.WithoutCancel(ctx), rec); err != nil {
		s.log.Warn("session not recorded", "mailbox_id", job.MailboxID, "err", err)
	}
	if rec.Succeeded && rec.NativeID != "" {
		if err := os.WriteFile(stateMarker(p.dir), []byte(rec.NativeID+"\n"), 0o600); err != nil {
			s.log.Warn("session marker not written", "dir", p.dir, "err", err)
		}
	}
	return rec
}

// runWithSession runs req under plan p. When the CLI refuses the resume in a way the adapter
// recognises (ErrSessionNotFound), it re-invokes the CLI once, fresh, within the same run and
// what is left of its time limit: not a retry — no status, counter or label changes.
func (s *Service) runWithSession(ctx context.Context, job phase.Job, req RunRequest, p *sessionPlan) (*RunOutcome, *phase.SessionRecord, error) {
	req.Input, req.SessionDir = p.in, p.dir
	out, err := s.exec.Run(ctx, req)
	if out != nil && out.Status == StatusDetached {
		return out, nil, err // still running: the next process records its session
	}
	if err != nil || !p.resumed || out.Status != StatusFailed || !errors.Is(out.Err, ErrSessionNotFound) {
		if err != nil && out == nil {
			return out, nil, err
		}
		return out, s.record(ctx, job, p, out), err
	}
	s.log.Info("the agent refused to resume its session; starting a fresh one in the same run",
		"mailbox_id", job.MailboxID, "adapter", p.adapter, "session", p.in.SessionID)
	used := out.Duration
	p.fresh(FallbackRefused)
	req.Input, req.NameSuffix = p.in, "-fresh"
	req.Timeout = s.exec.Timeout() - used
	if req.Timeout <= time.Second {
		return out, s.record(ctx, job, p, out), nil
	}
	out, err = s.exec.Run(ctx, req)
	if err != nil && out == nil {
		return out, nil, err
	}
	return out, s.record(ctx, job, p, out), err
}

// resumeVerified returns whether the adapter's CLI version in the run's image is verified to
// resume (SessionAgent.ResumeVerified of the version), detecting and recording the version
// (agent_installations) the first time.
func (s *Service) resumeVerified(ctx context.Context, adapter string, sa SessionAgent, in phase.Input) (bool, error) {
	inv, err := sa.Command(in)
	if err != nil {
		return false, fmt.Errorf("compile %s command: %w", adapter, err)
	}
	key := adapter + "\x00" + inv.Image
	s.mu.Lock()
	v, ok := s.verified[key]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	inst, err := s.sessions.Store.Installation(ctx, adapter, inv.Image)
	if err != nil {
		return false, err
	}
	if inst == nil {
		version, derr := s.detect(ctx, sa, inv.Image)
		if derr != nil {
			s.log.Warn("CLI version detection failed; not resuming sessions", "adapter", adapter, "image", inv.Image, "err", derr)
			return false, nil
		}
		inst = &Installation{Adapter: adapter, Image: inv.Image, Version: version, ResumeVerified: sa.ResumeVerified(version)}
		if err := s.sessions.Store.RecordInstallation(ctx, *inst); err != nil {
			return false, err
		}
		s.log.Info("agent CLI detected", "adapter", adapter, "image", inv.Image, "version", version,
			"resume_verified", inst.ResumeVerified)
	}
	// Judged again from the version each time, not taken from the record: the verified versions
	// are the adapter's and the configuration's of this release (a record from another one, or
	// from before verified_versions changed, may say otherwise).
	verified := sa.ResumeVerified(inst.Version)
	s.mu.Lock()
	s.verified[key] = verified
	s.mu.Unlock()
	return verified, nil
}

// detectPhase is the LabelPhase of a version detection's container.
const detectPhase = "detect"

// detect runs the CLI's version command in image, in a disposable container.
func (s *Service) detect(ctx context.Context, sa SessionAgent, image string) (string, error) {
	cmd := sa.Capabilities().VersionCommand
	if len(cmd) == 0 {
		return "", errors.New("the adapter declares no version command")
	}
	rt := s.exec.Runtime()
	spec := ContainerSpec{Name: "alfred-detect-" + strings.ToLower(uuid.NewString()[:12]), Image: image, Cmd: cmd,
		Env: []string{"HOME=" + HomeDir}, WorkingDir: "/", User: fmt.Sprintf("%d:%d", s.exec.UID(), s.exec.GID()),
		Labels: s.exec.ManagedLabels(map[string]string{LabelPhase: detectPhase}),
		Limits: Limits{MemoryBytes: 512 << 20, NanoCPUs: 1e9, PIDs: 128}}
	h, err := rt.Start(ctx, spec)
	if err != nil {
		return "", err
	}
	id := h.ID
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = rt.Destroy(cctx, id)
	}()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	exit, err := rt.Wait(wctx, id)
	if err != nil {
		return "", err
	}
	stdout, stderr, err := rt.Logs(ctx, id)
	if err != nil {
		return "", err
	}
	if exit.Code != 0 {
		return "", &VersionExitError{Cmd: cmd, Code: exit.Code, Stderr: strings.TrimSpace(string(stderr))}
	}
	return sa.ParseVersion(string(stdout))
}

// VersionExitError is ProbeCLI's error when the image's version command ran and exited
// non-zero: the image is there but does not run its CLI.
type VersionExitError struct {
	// Cmd is the version command; Code its exit code; Stderr what it printed there, trimmed.
	Cmd    []string
	Code   int
	Stderr string
}

func (e *VersionExitError) Error() string {
	return fmt.Sprintf("%s exited %d: %s", strings.Join(e.Cmd, " "), e.Code, e.Stderr)
}

// RemoveSessions deletes the session state of a mailbox (done, cancelled, issue gone).
func (s *Service) RemoveSessions(mailboxID int64) error {
	if s.sessions.Dir == "" {
		return nil
	}
	dir := filepath.Join(s.sessions.Dir, strconv.FormatInt(mailboxID, 10))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove session state: %w", err)
	}
	return nil
}

// SweepSessions removes the session state of every mailbox open does not accept (the orphan
// sweep, at start-up) and returns the mailbox ids removed.
func (s *Service) SweepSessions(open func(mailboxID int64) bool) ([]int64, error) {
	if s.sessions.Dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(s.sessions.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list session state: %w", err)
	}
	var removed []int64
	var errs []error
	for _, e := range entries {
		id, perr := strconv.ParseInt(e.Name(), 10, 64)
		if perr != nil || !e.IsDir() || open(id) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.sessions.Dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}

// recoveredPlan rebuilds the session plan of a run collected after a restart from the input it
// was given, so that its session is recorded like any run's. nil when the run used no session.
func (s *Service) recoveredPlan(ctx context.Context, job phase.Job, in phase.Input) *sessionPlan {
	if job.SessionName == "" || s.sessions.Store == nil || in.SessionName == "" {
		return nil
	}
	name, agent, ok := s.exec.Agent(in)
	sa, isSession := agent.(SessionAgent)
	if !ok || !isSession || !sa.Capabilities().ResumableSessions {
		return nil
	}
	p := &sessionPlan{adapter: name, caps: sa.Capabilities(), dir: s.sessions.SessionDir(job.MailboxID, name),
		in: in, resumed: in.Resume}
	if p.resumed {
		// The latest completed session is the one this run resumed: its reported usage is the
		// base of this run's share.
		prev, err := s.sessions.Store.LatestSession(ctx, job.MailboxID)
		if err == nil && prev != nil && prev.NativeID == in.SessionID {
			p.prev = prev
		}
	}
	return p
}
