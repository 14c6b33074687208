package mailbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// PollCursor is where the polling of one forge stands (the poll_cursors table).
type PollCursor struct {
	// Since is the forge's time from which the next poll asks what changed (zero: never
	// polled; the first poll asks from PollerConfig.FirstLookBack ago).
	Since time.Time
	// PolledAt is when the last successful poll ended (Alfred's clock), zero if none.
	PolledAt time.Time
	// FailedAt and Error are the last failed poll since the last successful one (zero, "":
	// none).
	FailedAt time.Time
	Error    string
}

// PollStore is what the polling transport keeps in the store (spec/transport.md).
type PollStore interface {
	// PollCursor reads the forge's cursor; the zero PollCursor for a forge never polled.
	PollCursor(ctx context.Context, forgeName string) (PollCursor, error)
	// SavePollCursor records a successful poll ending at polledAt: the next one asks from since.
	// It clears a failure recorded before.
	SavePollCursor(ctx context.Context, forgeName string, since, polledAt time.Time) error
	// PollFailed records a failed poll; the cursor is left where it was.
	PollFailed(ctx context.Context, forgeName string, at time.Time, errText string) error
	// MailboxOf returns the id of the issue's mailbox, or for a merge request the mailbox of
	// the issue the bot opened it for; 0 when there is none.
	MailboxOf(ctx context.Context, ref forge.IssueRef) (int64, error)
}

// PollerConfig tunes the polling transport. Zero values take the defaults.
type PollerConfig struct {
	// Interval is the time between two polls per forge name (forges[].poll_interval, default
	// 15s); only the forges listed are polled.
	Interval map[string]time.Duration
	// MaxBackoff bounds the wait after failed polls, which doubles from Interval with each
	// failure in a row (default 5m).
	MaxBackoff time.Duration
	// FirstLookBack is how far back the first poll of a forge (no cursor yet) asks (default
	// 1h): what is older is reconciliation's (its search of the bot's assignments), not a
	// first read of every notification the bot ever had.
	FirstLookBack time.Duration
	// OnPoll, when set, receives each finished poll (for metrics and tests).
	OnPoll func(PollStats)
	// Redact censors the error text of a failed poll before the store keeps it (nil: kept
	// as is).
	Redact func(string) string
}

// PollStats is what one poll of one forge did.
type PollStats struct {
	// Forge is the configured forge name.
	Forge string
	// Changes counts the changes the forge reported, Threads the distinct issues and merge
	// requests among them, Events the events derived and stored (duplicates not counted),
	// Calls the forge API calls made (pages not included).
	Changes, Threads, Events, Calls int
	// Since is the cursor the poll asked from, Next the one saved for the next poll (equal to
	// Since when the poll failed).
	Since, Next time.Time
	// Err is the error that made the poll fail, nil when it completed and the cursor moved.
	Err error
	// SetAside counts the threads this poll went on without: each failed threadSetAside
	// polls in a row (logged as an error; reconciliation tries it again).
	SetAside int
	// Duration is how long the poll took.
	Duration time.Duration
}

// Poller is the polling transport: every interval it asks each polled forge what changed for
// the bot since its cursor (forge.Poller: one request per kind of list, whatever the number of
// repositories and mailboxes), compares each changed issue's mailbox with the forge as
// reconciliation does (DeriveEvents: the same events, the same delivery ids, applied once
// whoever sees a change first) or derives the assignment of an issue that has none, stores the
// events, and only then moves the cursor. A failed poll keeps the cursor, so the next
// successful one covers the gap.
type Poller struct {
	cfg     PollerConfig
	recon   *Reconciler
	store   PollStore
	pollers map[string]forge.Poller
	log     *slog.Logger

	mu       sync.Mutex
	failures map[string]int // forge → failed polls in a row
	// threadFailures counts, per thread, the polls in a row whose comparison of it failed
	// with an error that is not the forge's unavailability (set aside at threadSetAside).
	threadFailures map[forge.IssueRef]int
}

// threadSetAside is the number of polls in a row a thread may fail (with an error other than
// the forge's unavailability: a 403 or 404 on one issue, an answer that cannot be read, its
// timeline failing on the forge) before the poll stops waiting for it: the poll's cursor moves
// past it so that the other threads go on, the failure is logged as an error, and
// reconciliation tries the thread again at its own pace.
const threadSetAside = 3

// NewPoller wires a poller: recon derives and stores the events (its bots, scopes, store and
// inbox), store keeps the cursors, pollers are the forge clients' poll calls by forge name.
func NewPoller(cfg PollerConfig, recon *Reconciler, store PollStore, pollers map[string]forge.Poller, log *slog.Logger) *Poller {
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, 5*time.Minute)
	cfg.FirstLookBack = cmp.Or(cfg.FirstLookBack, time.Hour)
	if log == nil {
		log = slog.Default()
	}
	return &Poller{cfg: cfg, recon: recon, store: store, pollers: pollers, log: log, failures: map[string]int{},
		threadFailures: map[forge.IssueRef]int{}}
}

// Run polls every configured forge at once and then every interval (longer after failures)
// until ctx ends, one goroutine per forge.
func (p *Poller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for name, every := range p.cfg.Interval {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				st := p.Poll(ctx, name)
				wait := cmp.Or(every, 15*time.Second)
				if st.Err != nil {
					wait = p.backoff(name, wait)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}()
	}
	wg.Wait()
}

// backoff is the wait after the latest failure of forge name: every doubled per failure in a
// row, at most MaxBackoff.
func (p *Poller) backoff(name string, every time.Duration) time.Duration {
	p.mu.Lock()
	n := p.failures[name]
	p.mu.Unlock()
	wait := every
	for i := 1; i < n && wait < p.cfg.MaxBackoff; i++ {
		wait *= 2
	}
	return min(wait, p.cfg.MaxBackoff)
}

// Poll polls forge name once: the changes since its cursor, each changed thread compared with
// the forge, the events stored, then the cursor moved to the newest change seen. The returned
// stats carry the error that made it fail, if any.
func (p *Poller) Poll(ctx context.Context, name string) (st PollStats) {
	st.Forge = name
	began := p.recon.now()
	defer func() {
		st.Duration = p.recon.now().Sub(began)
		p.finish(ctx, &st)
	}()
	bot, ok := p.recon.bots[name]
	src := p.pollers[name]
	if !ok || src == nil {
		st.Err = fmt.Errorf("poll %s: no forge client that polls", name)
		return st
	}
	cur, err := p.store.PollCursor(ctx, name)
	if err != nil {
		st.Err = err
		return st
	}
	if cur.Since.IsZero() {
		cur.Since = began.Add(-p.cfg.FirstLookBack).UTC().Truncate(time.Second)
	}
	st.Since, st.Next = cur.Since, cur.Since
	changes, err := src.Changes(ctx, cur.Since)
	st.Calls++
	if err != nil {
		st.Err = fmt.Errorf("poll %s: %w", name, err)
		return st
	}
	st.Changes = len(changes)
	next := cur.Since
	var refs []forge.IssueRef
	for _, c := range changes {
		c.Ref.Forge = name
		if !slices.Contains(refs, c.Ref) {
			refs = append(refs, c.Ref)
		}
		if c.UpdatedAt.After(next) {
			next = c.UpdatedAt
		}
	}
	st.Threads = len(refs)
	known, err := p.recon.store.KnownRepos(ctx, name)
	if err != nil {
		st.Err = err
		return st
	}
	rst := PassStats{Forge: name}
	for _, ref := range refs {
		err := p.thread(ctx, name, bot, ref, known, &rst)
		if p.setAside(ref, err) {
			st.SetAside++
			p.log.Error("a thread fails at every poll; the poll goes on without it and reconciliation tries it again",
				"forge", name, "thread", ref.String(), "polls", threadSetAside, "err", err)
			continue
		}
		if err != nil {
			st.Err = cmp.Or(st.Err, err) // the cursor stays: the next poll reads this thread again
		}
	}
	st.Calls += rst.Calls
	st.Events += rst.Events
	if st.Err != nil {
		return st
	}
	if err := p.store.SavePollCursor(ctx, name, next, p.recon.now()); err != nil {
		st.Err = err
		return st
	}
	st.Next = next
	return st
}

// setAside counts a failed comparison of ref (err nil: a success, which forgets its failures)
// and reports whether the thread is now set aside: threadSetAside polls in a row failed, with an
// error other than the forge's unavailability or the poll's end. The count starts again after
// a thread is set aside.
func (p *Poller) setAside(ref forge.IssueRef, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil || errors.Is(err, forge.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		delete(p.threadFailures, ref)
		return false
	}
	p.threadFailures[ref]++
	if p.threadFailures[ref] < threadSetAside {
		return false
	}
	delete(p.threadFailures, ref)
	return true
}

// thread compares one changed issue or merge request with the forge: the working mailbox it
// belongs to is reconciled (its merge request's review comments included); an issue without
// one is checked for an assignment of the bot. A merge request of someone else's is not
// followed by polling.
func (p *Poller) thread(ctx context.Context, name string, bot Bot, ref forge.IssueRef, known []string, st *PassStats) error {
	id, err := p.store.MailboxOf(ctx, ref)
	if err != nil {
		return err
	}
	if id != 0 {
		mb, err := p.recon.store.Get(ctx, id)
		if err != nil {
			return err
		}
		if mb.State.Working() {
			return p.recon.reconcileWith(ctx, bot, mb, st, true)
		}
	}
	if ref.MergeRequest {
		return nil
	}
	return p.assignment(ctx, name, bot, ref, known, st)
}

// assignment stores the assignees event of an open issue assigned to the bot in a repository
// of this Alfred's (Scope; a polled forge with no repositories listed takes every repository),
// attributed by the issue's history, as reconciliation's search does.
func (p *Poller) assignment(ctx context.Context, name string, bot Bot, ref forge.IssueRef, known []string, st *PassStats) error {
	is, err := bot.Forge.Issue(ctx, ref)
	st.Calls++
	if errors.Is(err, forge.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("poll %s: %w", ref, err)
	}
	if is.State != "open" || !slices.ContainsFunc(is.Assignees, func(a string) bool { return strings.EqualFold(a, bot.Login) }) {
		return nil
	}
	if ok, err := p.recon.oursAs(ctx, name, bot, known, ref.Repo, st, true); err != nil {
		return err
	} else if !ok {
		return nil
	}
	var d Derived
	err = d.assignment(ctx, bot.Forge, bot.Login, *is, ref, p.recon.now())
	st.Calls += d.Calls
	for _, what := range d.Unattributed {
		p.log.Warn("a change seen by polling names no author; not acted on", "forge", name, "target", ref.String(), "change", what)
	}
	if err != nil {
		return err
	}
	n, err := p.recon.deliver(ctx, d.Events)
	st.Events += n
	return err
}

// finish counts a failure in a row or clears the count, records a failure in the store, logs
// the poll and hands it to OnPoll.
func (p *Poller) finish(ctx context.Context, st *PollStats) {
	p.mu.Lock()
	if st.Err != nil {
		p.failures[st.Forge]++
	} else {
		p.failures[st.Forge] = 0
	}
	p.mu.Unlock()
	switch {
	case st.Err != nil:
		if ctx.Err() == nil {
			if err := p.store.PollFailed(ctx, st.Forge, p.recon.now(), p.redact(st.Err.Error())); err != nil {
				p.log.Warn("could not record a failed poll", "forge", st.Forge, "err", err)
			}
		}
		p.log.Warn("poll failed; the next poll asks from the same cursor", "forge", st.Forge, "since", st.Since,
			"changes", st.Changes, "events", st.Events, "calls", st.Calls, "err", st.Err)
	case st.Events > 0:
		p.log.Info("polled", "forge", st.Forge, "changes", st.Changes, "threads", st.Threads, "events", st.Events,
			"calls", st.Calls, "since", st.Since, "next", st.Next, "duration", st.Duration)
	default:
		p.log.Debug("polled", "forge", st.Forge, "changes", st.Changes, "threads", st.Threads, "calls", st.Calls, "duration", st.Duration)
	}
	if p.cfg.OnPoll != nil {
		p.cfg.OnPoll(*st)
	}
}

func (p *Poller) redact(s string) string {
	if p.cfg.Redact == nil {
		return s
	}
	return p.cfg.Redact(s)
}
