package mailbox

import "context"

// Derived returns how many issues r remembers as derived on forge name (Reconciler.derived),
// for the tests that check it forgets them.
func (r *Reconciler) Derived(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.derived[name])
}

// ThreadSetAside is threadSetAside: the polls in a row a thread may fail before it is set aside.
const ThreadSetAside = threadSetAside

// WithRunGate is withRunGate, for the tests of what a drain holds.
func WithRunGate(ctx context.Context, may func() bool) context.Context { return withRunGate(ctx, may) }

// PassesWaiting returns how many event workers wait for their pass to be admitted
// (WorkerConfig.Overlap).
func (w *Workers) PassesWaiting() int { return w.passes.waiters() }

// Woken reports whether a wake (Notify) is waiting for the workers, and takes it.
func (w *Workers) Woken() bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}
