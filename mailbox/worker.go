package mailbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// WorkerConfig tunes the workers. Zero values take the defaults.
type WorkerConfig struct {
	// Owner names this process in leases (default hostname-pid).
	Owner string
	// Count is the number of mailboxes processed at once (default 2).
	Count int
	// LeaseTTL is how long a lease lasts without a heartbeat (default 60s); the heartbeat
	// renews it every LeaseTTL/3.
	LeaseTTL time.Duration
	// Poll is how often an idle worker looks for due mailboxes (default 1s); deliveries to
	// this process wake a worker at once.
	Poll time.Duration
	// Backoff is how long a mailbox whose pass failed waits before it is tried again
	// (default 15s).
	Backoff time.Duration
}

// Workers lease due mailboxes and advance them through the machine (one pass each).
type Workers struct {
	cfg     WorkerConfig
	store   Store
	machine *Machine
	log     *slog.Logger
	wake    chan struct{}
}

// NewWorkers wires workers.
func NewWorkers(cfg WorkerConfig, store Store, machine *Machine, log *slog.Logger) *Workers {
	host, _ := os.Hostname()
	cfg.Owner = cmp.Or(cfg.Owner, fmt.Sprintf("%s-%d", host, os.Getpid()))
	cfg.Count = cmp.Or(cfg.Count, 2)
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, 60*time.Second)
	cfg.Poll = cmp.Or(cfg.Poll, time.Second)
	cfg.Backoff = cmp.Or(cfg.Backoff, 15*time.Second)
	if log == nil {
		log = slog.Default()
	}
	return &Workers{cfg: cfg, store: store, machine: machine, log: log.With("lease_owner", cfg.Owner),
		wake: make(chan struct{}, cfg.Count)}
}

// Notify wakes an idle worker (called after a delivery is stored). It never blocks.
func (w *Workers) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run processes mailboxes until ctx ends, then waits for the passes in progress to stop.
func (w *Workers) Run(ctx context.Context) {
	if n, err := w.store.ExpiredLeases(ctx); err == nil && n > 0 {
		w.log.Warn("rescuing mailboxes whose lease expired (a worker stopped)", "count", n)
	}
	var wg sync.WaitGroup
	for range w.cfg.Count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(ctx)
		}()
	}
	wg.Wait()
}

func (w *Workers) loop(ctx context.Context) {
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	for ctx.Err() == nil {
		worked, err := w.Once(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Error("mailbox pass failed", "err", err)
		}
		if worked {
			continue
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-w.wake:
		}
	}
}

// Once leases one due mailbox and advances it (Machine.Advance). It reports whether a mailbox was due.
func (w *Workers) Once(ctx context.Context) (bool, error) {
	mb, err := w.store.Lease(ctx, w.cfg.Owner, w.cfg.LeaseTTL)
	if err != nil || mb == nil {
		return false, err
	}
	log := w.log.With("mailbox_id", mb.ID, "forge", mb.Forge, "repo", mb.Repo, "issue", mb.Number)
	passCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan struct{})
	go func() {
		t := time.NewTicker(w.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-passCtx.Done():
				return
			case <-t.C:
				if err := w.store.Extend(passCtx, mb.ID, w.cfg.Owner, w.cfg.LeaseTTL); errors.Is(err, ErrLeaseLost) {
					log.Error("lease lost; stopping the pass")
					close(lost)
					cancel()
					return
				}
			}
		}
	}()
	passErr := w.machine.Advance(passCtx, mb)
	cancel()
	select {
	case <-lost:
		return true, fmt.Errorf("mailbox %d: lease lost during the pass: %w", mb.ID, ErrLeaseLost)
	default:
	}
	backoff := time.Duration(0)
	if passErr != nil && ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		w.machine.ReportFailure(rctx, mb.ID, passErr)
		rcancel()
	}
	if passErr != nil {
		backoff = w.cfg.Backoff
		if errors.Is(passErr, forge.ErrForbidden) {
			backoff = 4 * w.cfg.Backoff
		}
	}
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer relCancel()
	if err := w.store.Release(relCtx, mb.ID, w.cfg.Owner, backoff); err != nil {
		return true, errors.Join(passErr, err)
	}
	if passErr != nil {
		return true, fmt.Errorf("mailbox %d: %w", mb.ID, passErr)
	}
	return true, nil
}

// WakingInbox stores deliveries and wakes the workers; it implements webhook.Inbox.
type WakingInbox struct {
	Inbox   Inbox
	Workers *Workers
}

// Deliver stores ev (see Inbox.Deliver) and wakes a worker when it is new.
func (i WakingInbox) Deliver(ctx context.Context, ev forge.Event) (bool, error) {
	dup, err := i.Inbox.Deliver(ctx, ev)
	if err == nil && !dup && i.Workers != nil {
		i.Workers.Notify()
	}
	return dup, err
}
