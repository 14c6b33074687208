package mailbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// WorkerConfig tunes the workers. Zero values take the defaults.
type WorkerConfig struct {
	// Owner names this process in leases (default hostname-pid); each claim's lease is
	// Owner/<claim number> (Workers.claimOwner).
	Owner string
	// Count is the number of mailboxes processed at once (default 2): the first pass starts at
	// once, and each further one only while every pass in progress has run for at least
	// Overlap.
	Count int
	// Overlap is how long every event pass in progress must have run before another starts
	// beside it (default 50ms; negative: passes start side by side at once). A pass that calls
	// no forge ends before it, so under a burst of deliveries the passes run one after another
	// and each takes more events; one that waits on a forge lets the next start.
	Overlap time.Duration
	// LeaseTTL is how long a lease lasts without a heartbeat (default 60s); the heartbeat
	// renews it every LeaseTTL/3.
	LeaseTTL time.Duration
	// Poll is how often an idle worker looks for due mailboxes (default 1s); deliveries to
	// this process wake a worker at once.
	Poll time.Duration
	// Backoff is how long a mailbox whose pass failed waits before it is tried again
	// (default 15s).
	Backoff time.Duration
	// Runs is the number of run workers: agent runs at once in this process. With Runs > 0 the
	// Count workers only process events (acknowledgements, answers, validation, cancellation)
	// and stop where a run is due, and the run workers take those mailboxes in the order they
	// became due, so a long run never holds up another issue's reaction. 0 keeps one kind of
	// worker that runs the agent itself (as tests that drive Once expect).
	Runs int
	// RunsPerProject bounds the runs of one repository at once (0: only Runs bounds them).
	RunsPerProject int
	// ShutdownGrace is how long event passes in progress may go on once Run's context ends
	// (default 20s).
	ShutdownGrace time.Duration
	// ReplicaHeartbeat is how often SyncInstallation records this replica when its draining
	// and drained have not changed (default 30s). A change is recorded at the read that sees
	// it, so a drain's progress shows within half a second; an idle replica writes its row
	// twice a minute instead of at every read (two statements and a commit each, on every
	// replica, for as long as it runs). The pages list the replicas seen in the last 10
	// minutes.
	ReplicaHeartbeat time.Duration
}

// Workers lease due mailboxes and advance them through the machine (one pass each).
type Workers struct {
	cfg     WorkerConfig
	store   Store
	machine *Machine
	log     *slog.Logger
	wake    chan struct{}
	runWake chan struct{}
	// passes admits the Count workers' passes (WorkerConfig.Overlap); nil admits them at once.
	passes *lane
	busy   atomic.Int64 // run workers in a pass
	// draining stops every claim (Drain): the passes in progress finish, none starts. With a
	// store that implements Installation it follows the installation's drain each second.
	draining atomic.Bool
	// drainMu orders Drain and SyncInstallation's swap; drainGen counts the Drain calls, so
	// that a read of the installation's controls that began before one does not undo it.
	drainMu  sync.Mutex
	drainGen int64
	// paused follows the installation's pause of every claim (SyncInstallation): a pass in
	// progress starts no further run.
	paused atomic.Bool
	// claiming counts the claims and passes in progress (of every kind): a drained replica
	// has none.
	claiming atomic.Int64
	// claims numbers the claims, for their lease names (claimOwner).
	claims atomic.Int64
	// recorded is what SyncInstallation last wrote of this replica, and when.
	recordMu sync.Mutex
	recorded struct {
		at    time.Time
		state Replica
	}
}

// NewWorkers wires workers.
func NewWorkers(cfg WorkerConfig, store Store, machine *Machine, log *slog.Logger) *Workers {
	host, _ := os.Hostname()
	cfg.Owner = cmp.Or(cfg.Owner, fmt.Sprintf("%s-%d", host, os.Getpid()))
	cfg.Count = cmp.Or(cfg.Count, 2)
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, 60*time.Second)
	cfg.Poll = cmp.Or(cfg.Poll, time.Second)
	cfg.Backoff = cmp.Or(cfg.Backoff, 15*time.Second)
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, 20*time.Second)
	cfg.ReplicaHeartbeat = cmp.Or(cfg.ReplicaHeartbeat, 30*time.Second)
	cfg.Overlap = cmp.Or(cfg.Overlap, defaultOverlap)
	if log == nil {
		log = slog.Default()
	}
	var passes *lane
	if cfg.Overlap > 0 {
		passes = newLane(cfg.Overlap)
	}
	return &Workers{cfg: cfg, store: store, machine: machine, log: log.With("lease_owner", cfg.Owner),
		wake: make(chan struct{}, cfg.Count), runWake: make(chan struct{}, max(cfg.Runs, 1)), passes: passes}
}

// Idle implements RunSlots: run workers not in a pass.
func (w *Workers) Idle() int { return w.cfg.Runs - int(w.busy.Load()) }

// Limit implements RunSlots.
func (w *Workers) Limit() int { return w.cfg.Runs }

// Notify wakes an idle worker (called after a delivery is stored). It never blocks. With run
// workers, only an event worker wakes: a new event is an event worker's to apply first, and the
// pass that applies it wakes a run worker (OnceEvents), so a burst of deliveries costs no run
// worker a claim per delivery.
func (w *Workers) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Drain stops (on) or lets again (off) the workers of this process claim mailboxes, for an
// upgrade: a pass in progress, a run included, goes on and its outcome is applied; no lease is
// taken, so no new run starts, while draining. Events are still stored by the receiver and
// wait; turning the drain off wakes the workers.
func (w *Workers) Drain(on bool) {
	w.drainMu.Lock()
	w.drainGen++
	w.draining.Store(on)
	w.drainMu.Unlock()
	if !on {
		w.Notify()
	}
}

// Draining reports whether Drain is on.
func (w *Workers) Draining() bool { return w.draining.Load() }

// SyncInstallation reads the installation-wide drain from inst into Draining (waking the
// workers when it ends) and records this replica: seen now, draining, drained once no claim
// or pass is in progress; when none of it changed since the last record, only once every
// WorkerConfig.ReplicaHeartbeat. Run calls it before its first claim and then every Poll (at
// most half a second) when the store implements Installation; an error leaves Draining as it
// was.
func (w *Workers) SyncInstallation(ctx context.Context, inst Installation) error {
	w.drainMu.Lock()
	gen := w.drainGen
	w.drainMu.Unlock()
	st, err := inst.InstallationControls(ctx)
	if err != nil {
		return err
	}
	w.paused.Store(st.Paused)
	w.drainMu.Lock()
	if gen != w.drainGen {
		// Drain changed this replica's drain after the read began (the operator's form on this
		// replica writes the row, then calls Drain): the read may predate the row, and must not
		// undo it. The next read follows the row.
		st.Draining = w.draining.Load()
	}
	was := w.draining.Swap(st.Draining)
	w.drainMu.Unlock()
	if was != st.Draining {
		w.log.Warn("installation drain changed; this replica follows it", "draining", st.Draining, "by", st.DrainedBy)
		if !st.Draining {
			w.Notify()
			select {
			case w.runWake <- struct{}{}:
			default:
			}
		}
	}
	rep := Replica{ID: w.cfg.Owner, Draining: st.Draining, Drained: st.Draining && w.claiming.Load() == 0}
	w.recordMu.Lock()
	defer w.recordMu.Unlock()
	now := time.Now()
	if !w.recorded.at.IsZero() && w.recorded.state == rep && now.Sub(w.recorded.at) < w.cfg.ReplicaHeartbeat {
		return nil
	}
	if err := inst.RecordReplica(ctx, rep); err != nil {
		return err
	}
	w.recorded.at, w.recorded.state = now, rep
	return nil
}

// installationPoll bounds how often the workers read the installation controls: twice a
// second, so that every replica follows a drain within a second whatever the load.
const installationPoll = 500 * time.Millisecond

// followInstallation calls SyncInstallation each Poll (at most installationPoll) until ctx ends.
func (w *Workers) followInstallation(ctx context.Context, inst Installation) {
	t := time.NewTicker(min(w.cfg.Poll, installationPoll))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.SyncInstallation(ctx, inst); err != nil && ctx.Err() == nil {
			w.log.Warn("cannot read the installation controls; keeping the last", "err", err)
		}
	}
}

// Run processes mailboxes until ctx ends, then waits for the passes in progress to stop.
func (w *Workers) Run(ctx context.Context) {
	if n, err := w.store.ExpiredLeases(ctx); err == nil && n > 0 {
		w.log.Warn("rescuing mailboxes whose lease expired (a worker stopped)", "count", n)
	}
	// Once ctx ends no new pass starts. Passes in progress are not cut at once: an event pass
	// may finish for ShutdownGrace, a run pass leaves its container running (phase.ErrDetach)
	// for the next process to reattach; each releases its lease.
	runCtx, detach := context.WithCancelCause(context.WithoutCancel(ctx))
	eventCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	go func() {
		<-ctx.Done()
		detach(phase.ErrDetach)
		t := time.AfterFunc(w.cfg.ShutdownGrace, stopEvents)
		<-eventCtx.Done()
		t.Stop()
	}()
	var wg sync.WaitGroup
	if inst, ok := w.store.(Installation); ok {
		// Read once before any claim: a replica started during a drain claims nothing.
		if err := w.SyncInstallation(ctx, inst); err != nil {
			w.log.Warn("cannot read the installation controls", "err", err)
		}
		wg.Go(func() { w.followInstallation(ctx, inst) })
	}
	once, onceCtx := w.Once, runCtx
	if w.cfg.Runs > 0 {
		once, onceCtx = w.OnceEvents, eventCtx
		for range w.cfg.Runs {
			wg.Go(func() { w.loop(ctx, runCtx, w.OnceRun, w.runWake, nil) })
		}
	}
	for range w.cfg.Count {
		wg.Go(func() { w.loop(ctx, onceCtx, once, w.wake, w.passes) })
	}
	wg.Wait()
}

// loop makes passes with once on passCtx, each admitted by passes (nil: at once), until stop
// ends.
func (w *Workers) loop(stop, passCtx context.Context, once func(context.Context) (bool, error), wake <-chan struct{}, passes *lane) {
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	for stop.Err() == nil {
		leave, ok := passes.enter(stop)
		if !ok {
			return
		}
		worked, err := once(passCtx)
		leave()
		if err != nil && stop.Err() == nil {
			w.log.Error("mailbox pass failed", "err", err)
		}
		if worked {
			continue
		}
		select {
		case <-stop.Done():
		case <-t.C:
		case <-wake:
		}
	}
}

// Once leases one due mailbox and advances it (Machine.Advance), runs included. It reports
// whether a mailbox was due; while draining it leases nothing.
func (w *Workers) Once(ctx context.Context) (bool, error) {
	w.claiming.Add(1) // before the drain is read: a replica seen drained claims nothing
	defer w.claiming.Add(-1)
	if w.draining.Load() || w.paused.Load() {
		return false, nil
	}
	owner := w.claimOwner()
	mb, err := w.store.Lease(ctx, owner, w.cfg.LeaseTTL)
	if err != nil || mb == nil {
		return false, err
	}
	return true, w.pass(ctx, mb, owner, w.machine.Advance)
}

// claimOwner names one claim's lease: the process's owner (WorkerConfig.Owner) and the claim's
// number. Each claim holds its own name, so that a worker whose lease expired (the database
// unreachable longer than the TTL) learns it from its next Extend even when another worker of
// the same process took the mailbox meanwhile, and its Release frees nothing of that one's.
func (w *Workers) claimOwner() string {
	return fmt.Sprintf("%s/%d", w.cfg.Owner, w.claims.Add(1))
}

// OnceEvents is Once for an event worker: it leases a mailbox due by its events or timers (not
// one only waiting for its run) and advances it up to the run (Machine.AdvanceEvents).
func (w *Workers) OnceEvents(ctx context.Context) (bool, error) {
	w.claiming.Add(1) // before the drain is read: a replica seen drained claims nothing
	defer w.claiming.Add(-1)
	if w.draining.Load() || w.paused.Load() {
		return false, nil
	}
	owner := w.claimOwner()
	mb, err := w.store.LeaseEvents(ctx, owner, w.cfg.LeaseTTL, RunStates())
	if err != nil || mb == nil {
		return false, err
	}
	claimedInRun := def(mb.State).Phase != ""
	err = w.pass(ctx, mb, owner, func(ctx context.Context, mb *Mailbox) error { return w.machine.AdvanceEvents(ctx, mb, w) })
	// A run worker is woken when this mailbox may concern one: it is in a run state now (its
	// run is due, or a container is left to reattach to), it was when claimed (its lease
	// counted against its repository's runs, RunsPerProject), or the pass failed. A pass on an
	// issue that neither holds nor starts a run wakes none: each wake costs a run worker's claim.
	if ctx.Err() == nil && (claimedInRun || def(mb.State).Phase != "" || err != nil) {
		select {
		case w.runWake <- struct{}{}:
		default:
		}
	}
	return true, err
}

// OnceRun is Once for a run worker: it leases the mailbox whose run has waited longest (within
// RunsPerProject) and advances it, run included.
func (w *Workers) OnceRun(ctx context.Context) (bool, error) {
	w.claiming.Add(1) // before the drain is read: a replica seen drained claims nothing
	defer w.claiming.Add(-1)
	if w.draining.Load() || w.paused.Load() {
		return false, nil
	}
	owner := w.claimOwner()
	mb, err := w.store.LeaseRun(ctx, owner, w.cfg.LeaseTTL, RunStates(), w.cfg.RunsPerProject)
	if err != nil || mb == nil {
		return false, err
	}
	w.busy.Add(1)
	defer w.busy.Add(-1)
	return true, w.pass(ctx, mb, owner, w.machine.Advance)
}

// pass advances the mailbox leased as owner with advance under a heartbeat, reports a failure
// and releases the lease (with a backoff after a failure).
func (w *Workers) pass(ctx context.Context, mb *Mailbox, owner string, advance func(context.Context, *Mailbox) error) error {
	log := w.log.With("mailbox_id", mb.ID, "forge", mb.Forge, "repo", mb.Repo, "issue", mb.Number)
	passCtx, cancel := context.WithCancelCause(withRunGate(ctx, func() bool { return !w.draining.Load() && !w.paused.Load() }))
	defer cancel(nil)
	lost := make(chan struct{})
	go func() {
		t := time.NewTicker(w.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-passCtx.Done():
				return
			case <-t.C:
				if err := w.store.Extend(passCtx, mb.ID, owner, w.cfg.LeaseTTL); errors.Is(err, ErrLeaseLost) {
					log.Error("lease lost; stopping the pass, its run's container left running")
					close(lost)
					cancel(errLeaseLostDetach{})
					return
				}
			}
		}
	}()
	passErr := advance(passCtx, mb)
	cancel(nil)
	pause := time.Duration(0)
	if errors.Is(passErr, errEventsHeld) { // not a failure: the run worker acts first
		passErr, pause = nil, w.cfg.Poll
	}
	select {
	case <-lost:
		return fmt.Errorf("mailbox %d: lease lost during the pass: %w", mb.ID, ErrLeaseLost)
	default:
	}
	if errors.Is(passErr, ErrLeaseLost) {
		// A save was refused: the lease changed hands since the pass read the mailbox. Its
		// holder decides now; nothing of this pass is a failure of the mailbox's, and the
		// lease to release is no longer this pass's.
		log.Error("lease lost; the pass's decisions were not saved", "err", passErr)
		return fmt.Errorf("mailbox %d: %w", mb.ID, passErr)
	}
	backoff := pause
	if passErr != nil && ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		w.machine.ReportFailure(rctx, mb.ID, owner, passErr)
		rcancel()
	}
	if passErr != nil && ctx.Err() == nil { // a pass stopped by shutdown is not a failure
		backoff = w.cfg.Backoff
		if errors.Is(passErr, forge.ErrForbidden) {
			backoff = 4 * w.cfg.Backoff
		}
	}
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer relCancel()
	if err := w.store.Release(relCtx, mb.ID, owner, backoff); err != nil {
		return errors.Join(passErr, err)
	}
	if passErr != nil {
		return fmt.Errorf("mailbox %d: %w", mb.ID, passErr)
	}
	return nil
}

// WakingInbox stores deliveries and wakes the workers; it implements webhook.Inbox.
type WakingInbox struct {
	Inbox   Inbox
	Workers *Workers
}

// Deliver stores ev (see Inbox.Deliver) and wakes a worker when it is new and waits for a
// pass: an ArrivalInbox that stored it already processed (OutcomeAtRest) wakes nobody.
func (i WakingInbox) Deliver(ctx context.Context, ev forge.Event) (bool, error) {
	dup, pending := false, true
	var err error
	if a, ok := i.Inbox.(ArrivalInbox); ok {
		dup, pending, err = a.Arrive(ctx, ev)
	} else {
		dup, err = i.Inbox.Deliver(ctx, ev)
	}
	if err == nil && !dup && pending && i.Workers != nil {
		i.Workers.Notify()
	}
	return dup, err
}

// errLeaseLostDetach ends a pass whose lease was lost (a heartbeat found it expired, or taken):
// a run it started is left running as at a shutdown (it is phase.ErrDetach), its container,
// record and row kept, for whoever holds the mailbox next to reattach; stopping it would run
// the phase again, or kill the container another replica has adopted.
type errLeaseLostDetach struct{}

func (errLeaseLostDetach) Error() string {
	return "the mailbox's lease was lost: the run's container is left running for whoever holds the mailbox next"
}

func (errLeaseLostDetach) Is(target error) bool { return target == phase.ErrDetach }
