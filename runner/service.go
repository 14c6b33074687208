package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/internal/base/runfile"
	"github.com/alfred-bot/alfred/internal/base/textwalk"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Service runs a mailbox's Job end to end: a git worktree of the mailbox's branch, the agent's
// container (Executor), then — for read-write phases — a commit with the bot identity and a
// push. It implements mailbox.JobRunner.
type Service struct {
	exec     *Executor
	git      map[string]*gitrepo.Manager
	log      *slog.Logger
	sessions SessionConfig

	mu       sync.Mutex
	verified map[string]bool // adapter + image → resume verified
}

// NewService wires a Service. git maps a configured forge name to the git manager holding
// that forge's credentials; all managers may share one data directory. sessions enables one
// agent session per mailbox (zero value: off).
func NewService(exec *Executor, git map[string]*gitrepo.Manager, sessions SessionConfig, log *slog.Logger) *Service {
	return &Service{exec: exec, git: git, log: cmp.Or(log, slog.Default()), sessions: sessions,
		verified: map[string]bool{}}
}

// Execute runs job. The error is for infrastructure failures (git or Docker unavailable, the
// push refused); a run that fails is reported in phase.Outcome.Failure. The run works in the
// mailbox's worktree (WorktreeName), prepared by gitrepo.Manager.Prepare and kept for the
// mailbox's next run; the container is removed before it returns. After the run, when the
// project has no spare worktree, one is checked out for its next new mailbox (Warm).
func (s *Service) Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error) {
	mgr, ok := s.git[job.ForgeName]
	if !ok {
		return nil, fmt.Errorf("no git credentials for forge %q", job.ForgeName)
	}
	p := gitrepo.Project{Forge: job.ForgeName, Path: job.Repository.Path, CloneURL: job.Repository.CloneURL,
		DefaultBranch: job.Repository.DefaultBranch}
	name := ContainerName(job.MailboxID, job.RunID, job.Input.Phase, job.Attempt)
	wt, err := mgr.Prepare(ctx, p, WorktreeName(job.MailboxID), checkoutOf(job))
	if err != nil {
		if ctx.Err() != nil {
			return &phase.Outcome{Interrupted: true, Container: name}, nil
		}
		return nil, fmt.Errorf("prepare worktree: %w", err)
	}
	defer s.warm(ctx, mgr, p)
	if done, err := prepareGit(ctx, mgr, p, wt, &job); done != nil || err != nil {
		if err != nil && ctx.Err() != nil {
			return &phase.Outcome{Interrupted: true, Container: name}, nil
		}
		return done, err
	}

	req := RunRequest{MailboxID: job.MailboxID, RunID: job.RunID, Attempt: job.Attempt,
		Input: job.Input, Worktree: wt.Path}
	plan, err := s.plan(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("plan the session: %w", err)
	}
	bound, agent, _ := s.exec.Agent(job.Input)
	api, apiMode := agent.(APIAgent)
	var (
		out     *RunOutcome
		session *phase.SessionRecord
	)
	if plan != nil {
		out, session, err = s.runWithSession(ctx, job, req, plan)
	} else {
		out, err = s.exec.Run(ctx, req)
		if apiMode {
			session = s.recordAPIMode(ctx, job, bound, api, out)
		}
	}
	if out != nil && out.Status == StatusDetached {
		// The container goes on in the mailbox's worktree, which is kept; the restart
		// reattaches it.
		return &phase.Outcome{Interrupted: true, Detached: true, Container: out.Name}, nil
	}
	var adapter string // the agent that ran: its usage is counted
	if out != nil {
		adapter = bound
	}
	// container names the run's container for an outcome; API mode has none (the pages show
	// none, recovery looks for none).
	container := func(n string) string {
		if apiMode {
			return ""
		}
		return n
	}
	if out != nil && out.Status == StatusCanceled || (err != nil && ctx.Err() != nil) {
		return &phase.Outcome{Interrupted: true, Container: container(name), Session: session, Adapter: adapter}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", name, err)
	}
	res := &phase.Outcome{ExitCode: out.Exit.Code, Container: container(out.Name), Output: joinOutput(out), Session: session,
		Adapter: adapter}
	return s.finish(ctx, job, mgr, wt, out, res)
}

// finish completes the job's Outcome from a collected run, for Execute and Recover alike: a
// failed run gets its Failure; a succeeded one its Result and, when the job pushes, is
// published (publish) with HeadSHA set to the commit pushed.
func (s *Service) finish(ctx context.Context, job phase.Job, mgr *gitrepo.Manager, wt *gitrepo.Worktree,
	out *RunOutcome, res *phase.Outcome) (*phase.Outcome, error) {
	res.HostileOutput = hostileOutput(out)
	if len(res.HostileOutput) > 0 {
		s.log.Warn("hostile run output refused or bounded", "container", out.Name,
			"reasons", res.HostileOutput, "logs_dropped", out.LogsDropped, "err", out.Err)
	}
	if out.Status != StatusSucceeded {
		res.Failure = describeFailure(out)
		return res, nil
	}
	res.Result = out.Result
	if !job.Push {
		return res, nil
	}
	// The message lands on the target branch at the merge: a closing keyword the agent (or the
	// issue's title in the default message) wrote would close another issue there.
	message := forge.DefuseClosingReferences(cmp.Or(strings.TrimSpace(out.Result.CommitMessage), job.CommitMessage))
	if job.Input.Phase == phase.ConflictResolution {
		sha, refused, hostile, err := publishMerge(ctx, mgr, wt, conflictedPaths(job.Input), message)
		if err != nil {
			return nil, err
		}
		if hostile != "" {
			res.HostileOutput = append(res.HostileOutput, hostile)
			s.log.Warn("hostile run output refused", "container", out.Name, "reasons", res.HostileOutput)
		}
		res.HeadSHA, res.Failure = sha, refused
		if refused != "" {
			res.Result = nil
		}
		return res, nil
	}
	sha, err := publish(ctx, mgr, wt, message)
	if refused := leakRefusal(err); refused != "" {
		res.Failure, res.Result = refused, nil
		return res, nil
	}
	if re := (*runfile.RefusedError)(nil); errors.As(err, &re) {
		// The agent left what git cannot commit (a FIFO where the branch has a file): hostile
		// output, the run's failure with its reason, not a failure of Alfred to run again.
		res.HostileOutput = append(res.HostileOutput, re.Reason)
		s.log.Warn("hostile run output refused", "container", out.Name, "reasons", res.HostileOutput, "err", err)
		res.Failure, res.Result = "I did not commit what the agent left: "+refusedCommit(re)+
			" (nothing was sent; a retry starts again from the branch as the forge has it)", nil
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	res.HeadSHA = sha
	return res, nil
}

// leakRefusal words a push gitrepo refused because its commits hold a secret
// (gitrepo.ErrSecretInPush) as the run's failure: the files and kinds, never the secret. It is
// "" for any other error. Nothing was pushed; the next run's worktree starts again from the
// remote branch, without the commit.
func leakRefusal(err error) string {
	var le *gitrepo.LeakError
	if !errors.As(err, &le) {
		return ""
	}
	var where []string
	for _, l := range le.Leaks {
		where = append(where, l.Where()+" holds "+l.Kind)
	}
	return "I did not push the commit: " + strings.Join(where, "; ") +
		" (nothing was sent; a retry starts again from the branch as the forge has it)"
}

// refusedCommit words a file of the worktree gitrepo refused to stage: its path as code (made
// storable, its backticks replaced) and why.
func refusedCommit(re *runfile.RefusedError) string {
	return "`" + strings.ReplaceAll(textwalk.Storable(re.Name), "`", "'") + "`: " + re.Detail
}

// publish is the one path by which a read-write phase's work leaves its worktree, for a live
// run and a recovered one alike: it commits everything the agent changed in wt with the bot
// identity (the git manager's author) and message, and pushes wt's branch. It returns the
// commit's SHA, or "" when the agent changed nothing (then nothing is pushed; the machine
// decides what that means). Errors name the step that failed; commits that hold a secret are
// not pushed (a *gitrepo.LeakError, see leakRefusal).
func publish(ctx context.Context, mgr *gitrepo.Manager, wt *gitrepo.Worktree, message string) (string, error) {
	sha, err := mgr.Commit(ctx, wt, message)
	if err != nil {
		return "", fmt.Errorf("commit the agent's changes: %w", err)
	}
	if sha == "" {
		return "", nil
	}
	if err := mgr.Push(ctx, wt); err != nil {
		return "", fmt.Errorf("push %s: %w", wt.Branch, err)
	}
	return sha, nil
}

// warm checks out a spare worktree of p for its next new mailbox when it has none
// (gitrepo.Manager.Warm), on a fresh bounded context, unless ctx is cancelled (Alfred is
// stopping). A failure is logged: the next new mailbox then checks out its own.
func (s *Service) warm(ctx context.Context, mgr *gitrepo.Manager, p gitrepo.Project) {
	if ctx.Err() != nil {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if err := mgr.Warm(wctx, p); err != nil {
		s.log.Warn("no spare worktree checked out", "repo", p.Path, "err", err)
	}
}

func joinOutput(out *RunOutcome) string {
	var b strings.Builder
	b.WriteString(out.Stdout)
	if out.Stderr != "" {
		b.WriteString("\n--- stderr ---\n")
		b.WriteString(out.Stderr)
	}
	return b.String()
}

// hostileOutput returns the reasons (internal/base/runfile) of what was refused or bounded of the
// run's output: a refused file, a flood of logs.
func hostileOutput(out *RunOutcome) []string {
	var reasons []string
	if r := runfile.Reason(out.Err); r != "" {
		reasons = append(reasons, r)
	}
	if out.LogsDropped > 0 {
		reasons = append(reasons, runfile.ReasonLogFlood)
	}
	return reasons
}

// describeFailure words a failed run for the issue comment.
func describeFailure(out *RunOutcome) string {
	switch {
	case errors.Is(out.Err, runfile.ErrRefused):
		return "I did not read what the agent left: " + out.Err.Error()
	case out.Status == StatusTimedOut || errors.Is(out.Err, ErrTimeout):
		return fmt.Sprintf("it ran out of time after %s and was stopped", out.Duration.Round(time.Second))
	case out.Exit.Disrupted != "":
		return fmt.Sprintf("the cluster ended the run's Pod (%s): the agent did not fail", out.Exit.Disrupted)
	case errors.Is(out.Err, phase.ErrNoResult):
		if out.Exit.Code != 0 {
			return fmt.Sprintf("the agent exited with code %d and wrote no result", out.Exit.Code)
		}
		return "the agent wrote no result"
	case errors.Is(out.Err, phase.ErrInvalidResult):
		return "the agent's result is invalid: " + out.Err.Error()
	case out.Exit.OOMKilled:
		return "the container ran out of memory"
	case out.Exit.Code != 0:
		msg := fmt.Sprintf("the agent exited with code %d", out.Exit.Code)
		if last := lastLine(out.Stderr); last != "" {
			msg += ": " + last
		}
		return msg
	case out.Err != nil:
		return out.Err.Error()
	}
	return "the run did not succeed"
}

// lastLine returns the last non-blank line of s, at most 300 bytes (cut at a character).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 300 {
		cut := 300
		for cut > 0 && !isRuneStart(l[cut]) {
			cut--
		}
		l = l[:cut] + "…"
	}
	return l
}

// Cleanup destroys the mailbox's containers and retires its worktree (gitrepo.Manager.Retire:
// kept clean as its project's spare when the project has none, removed otherwise), then
// removes any other worktree of the mailbox (names alfred-mbx<id>-…).
func (s *Service) Cleanup(ctx context.Context, mailboxID int64) error {
	id := strconv.FormatInt(mailboxID, 10)
	_, err := s.exec.Reap(ctx, func(labels map[string]string) bool { return labels[LabelMailbox] != id })
	var rerr error
	for _, mgr := range s.git {
		rerr = mgr.Retire(ctx, WorktreeName(mailboxID)) // every manager shares the data directory
		break
	}
	prefix := fmt.Sprintf("alfred-mbx%d-", mailboxID)
	return errors.Join(err, rerr, s.sweep(ctx, func(name string) bool { return !strings.HasPrefix(name, prefix) }))
}

// Mailboxes is what the store knows about the mailboxes when leftovers are reaped; each map
// holds the ids for which the statement is true.
type Mailboxes struct {
	// Leased: a live process holds the mailbox's lease.
	Leased map[int64]bool
	// Open: the mailbox is not closed (its session state is kept).
	Open map[int64]bool
	// LiveContainers: the mailbox has a live container record (its recovery owns its runs).
	LiveContainers map[int64]bool
}

// ReapLeftovers is the start-up clean-up policy, run after recovery: it removes the session
// state and the worktree of mailboxes that are no longer open, the containers no live
// container record accounts for (RemoveOrphans), what a LeftoverSweeper runtime left beside
// containers that are gone (run Secrets without their Pod), and the containers, run directories and run
// worktrees of mailboxes that are neither leased by a live process nor have a live container
// record. What it removed is logged; failures are joined.
//
// read returns the store's view of the mailboxes. Another replica sharing the data directory
// and the runtime (spec/kubernetes.md, "Replicas") works on while this one starts, so each
// sweep lists what it might remove first (directories, containers) and reads the store only
// then, once per sweep: whatever the other replica starts after a listing is not in it, and
// whatever it started before is, by the time of the read, under its lease or a live container
// record (a lease is taken before a worktree, session directory, run directory or container
// is made, a record written before a container is created). A view read before the listings
// would take a mailbox leased in between for a leftover and remove its live run. When read
// fails, the sweep keeps everything. A version-detection container that still runs is
// another replica's detection in progress and is kept (it ends on its own; the next start-up
// removes it once exited).
func (s *Service) ReapLeftovers(ctx context.Context, read func(context.Context) (Mailboxes, error)) error {
	var errs []error
	// view reads the store once, at a sweep's first question (after the sweep's listing).
	view := func() func() (Mailboxes, bool) {
		var (
			once sync.Once
			mb   Mailboxes
			ok   bool
		)
		return func() (Mailboxes, bool) {
			once.Do(func() {
				var err error
				if mb, err = read(ctx); err != nil {
					errs = append(errs, fmt.Errorf("read the mailboxes: %w", err))
				} else {
					ok = true
				}
			})
			return mb, ok
		}
	}
	// keepMailbox: a mailbox's own worktree lives as long as the mailbox is open.
	keepMailbox := func(v func() (Mailboxes, bool)) func(int64) bool {
		return func(id int64) bool {
			mb, ok := v()
			return !ok || mb.Open[id] || mb.Leased[id] || mb.LiveContainers[id]
		}
	}
	keepRuns := func(v func() (Mailboxes, bool)) func(int64) bool {
		return func(id int64) bool {
			mb, ok := v()
			return !ok || mb.Leased[id] || mb.LiveContainers[id]
		}
	}
	// Session state lives as long as its mailbox is open; what is left of closed or deleted
	// mailboxes is an orphan.
	sessions := view()
	removed, err := s.SweepSessions(func(id int64) bool {
		mb, ok := sessions()
		return !ok || mb.Open[id]
	})
	errs = append(errs, err)
	if len(removed) > 0 {
		s.log.Info("removed orphaned agent session state", "mailboxes", removed)
	}
	// Containers no live container record accounts for are orphans; the containers and
	// worktrees of a mailbox with a live record belong to its recovery (the next pass
	// reattaches).
	orphans, err := s.RemoveOrphans(ctx)
	errs = append(errs, err)
	if len(orphans) > 0 {
		s.log.Info("removed containers no live container record accounts for", "containers", orphans)
	}
	if sw, ok := s.exec.cfg.Runtime.(LeftoverSweeper); ok {
		left, err := sw.SweepLeftovers(ctx, s.exec.ManagedLabels(nil))
		errs = append(errs, err)
		if len(left) > 0 {
			s.log.Info("removed what runs left beside containers that are gone", "objects", left)
		}
	}
	containers := view()
	reaped, err := s.exec.Reap(ctx, func(labels map[string]string) bool {
		if unrecorded(labels) {
			return true
		}
		id, perr := strconv.ParseInt(labels[LabelMailbox], 10, 64)
		return perr == nil && keepRuns(containers)(id)
	})
	errs = append(errs, err)
	if len(reaped) > 0 {
		s.log.Info("removed the containers of mailboxes no live process holds", "containers", reaped)
	}
	worktrees := view()
	errs = append(errs, s.sweep(ctx, func(name string) bool {
		var id int64
		if _, perr := fmt.Sscanf(name, "alfred-mbx%d-", &id); perr != nil {
			return true // not ours
		}
		if name == WorktreeName(id) {
			return keepMailbox(worktrees)(id)
		}
		return keepRuns(worktrees)(id)
	}))
	errs = append(errs, s.exec.sweepRunDirs(keepRuns(view())))
	return errors.Join(errs...)
}

// sweep removes the worktrees keep rejects. Every forge's git manager shares the one worktree
// directory under the data directory, so one sweep covers them all.
func (s *Service) sweep(ctx context.Context, keep func(name string) bool) error {
	for _, mgr := range s.git {
		_, err := mgr.Sweep(ctx, keep)
		return err
	}
	return nil
}
