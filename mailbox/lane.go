package mailbox

import (
	"context"
	"sync"
	"time"
)

// defaultOverlap is WorkerConfig.Overlap's default. An event pass that calls no forge takes a
// few milliseconds (3,000 comments over 50 mailboxes: about 245 passes of 12 events, about 4
// ms each, docs/figures.md); one that posts or reads on a forge waits tens of milliseconds or
// more on each call, and that wait is what another pass beside it may use.
const defaultOverlap = 50 * time.Millisecond

// lane admits the event workers' passes: one at a time, and another beside them once every pass
// in progress has run for at least overlap (it waits on the forge, and the CPU is free for
// another). Passes one after another each take more of a busy mailbox's events than passes
// side by side, so a burst costs fewer passes and less CPU, and they leave more of the cores to
// the receiver storing the burst: at 8 senders on a 2-core machine the ingest rose from 0.28
// to 0.36 × pgbench. The price is the burst's processing: its backlog is processed later (700
// events left at its end, processed in 250 ms, against 400 in 135 ms), and a burst stored
// with the workers stopped drains 15 % slower (docs/figures.md). Passes that call a forge for
// less than overlap run one after another too. A nil *lane admits every pass at once.
type lane struct {
	overlap time.Duration
	mu      sync.Mutex
	active  map[*time.Time]struct{} // the start of each pass in progress
	waiting int                     // workers waiting in enter
	changed chan struct{}           // closed when a pass ends
}

func newLane(overlap time.Duration) *lane {
	return &lane{overlap: overlap, active: map[*time.Time]struct{}{}, changed: make(chan struct{})}
}

// enter waits until a pass may start and returns the function that ends it; ok is false, and
// nothing started, when stop ended first.
func (l *lane) enter(stop context.Context) (leave func(), ok bool) {
	if l == nil {
		return func() {}, stop.Err() == nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if stop.Err() != nil {
			return nil, false
		}
		now := time.Now()
		var youngest time.Time
		for s := range l.active {
			if s.After(youngest) {
				youngest = *s
			}
		}
		if len(l.active) == 0 || now.Sub(youngest) >= l.overlap {
			start := &now
			l.active[start] = struct{}{}
			return func() { l.leave(start) }, true
		}
		changed := l.changed
		l.waiting++
		l.mu.Unlock()
		t := time.NewTimer(youngest.Add(l.overlap).Sub(now))
		select {
		case <-stop.Done():
		case <-t.C:
		case <-changed:
		}
		t.Stop()
		l.mu.Lock()
		l.waiting--
	}
}

// leave ends the pass that began at start and wakes the workers waiting in enter.
func (l *lane) leave(start *time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.active, start)
	close(l.changed)
	l.changed = make(chan struct{})
}

// waiters returns how many workers wait in enter.
func (l *lane) waiters() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}
