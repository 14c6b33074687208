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

// ReconcilerConfig tunes reconciliation. Zero values take the defaults.
type ReconcilerConfig struct {
	// Interval is the time between two passes (config reconcile_interval, default 5m). A pass
	// spreads its reads over the interval.
	Interval time.Duration
	// Batch bounds the mailboxes one pass compares per forge (default 50), least recently
	// reconciled first; the others wait for the next pass.
	Batch int
	// OnPass, when set, receives each finished pass per forge (for metrics).
	OnPass func(PassStats)
	// Scopes holds, per configured forge name, how a repository that has no mailbox yet is
	// recognised as this Alfred's (see Scope). A forge without one considers only the
	// repositories it has mailboxes in.
	Scopes map[string]Scope
	// Rediscover is how long what a repository's hooks said is kept before they are read
	// again, and how often the search for assignments starts from the beginning instead of
	// the previous pass (default 1h), so that a hook set up after the assignment is found too.
	Rediscover time.Duration
}

// Scope tells reconciliation which repositories without a mailbox belong to this Alfred: an
// issue assigned to the bot there is one to work on (one bot account may be shared by several
// installations, each with its own repositories).
type Scope struct {
	// HookURL is the URL this Alfred's webhooks are set to on the forge: the public URL +
	// "/webhooks/" + the forge name (what `alfred doctor` prints as "Webhook URL to set"). A
	// repository with a hook to it, active or disabled, is this Alfred's. Empty: no repository
	// is recognised by its hooks.
	HookURL string
	// Repositories are repository paths ("owner/name", GitLab paths) that are this Alfred's
	// whatever their hooks say (forges[].repositories): for a bot that may not read hooks.
	Repositories []string
	// AnyRepository makes every repository this Alfred's: a forge that is polled with no
	// Repositories listed (its bot's notifications are its own; spec/transport.md).
	AnyRepository bool
}

// PassStats is what one reconciliation pass did on one forge.
type PassStats struct {
	// Forge is the configured forge name.
	Forge string
	// Mailboxes counts the mailboxes compared; NewAssignments the issues assigned to the bot
	// that had no mailbox; Events the events derived and stored (duplicates of earlier passes
	// not counted); Calls the forge API calls made; Discovered the repositories without a
	// mailbox found to be this Alfred's by their hooks.
	Mailboxes, NewAssignments, Events, Calls, Discovered int
	// Unattributed counts changes seen whose author the forge's history does not name; they
	// were not acted on.
	Unattributed int
	// Err is the first error of the pass, nil when it completed.
	Err error
	// Duration is how long the pass took.
	Duration time.Duration
}

// Deliverer stores an inbound event (Inbox.Deliver's contract); WakingInbox is one.
type Deliverer interface {
	// Deliver stores ev and reports whether it was a duplicate (see Inbox.Deliver).
	Deliver(ctx context.Context, ev forge.Event) (duplicate bool, err error)
}

// Reconciler compares open mailboxes with their forge and stores what differs as events, so
// that a change whose delivery was lost (Alfred down, a hook disabled, a forge that never
// retries) is applied anyway, exactly once (see DeriveEvents). It also finds issues assigned
// to the bot that have no mailbox, in the repositories of this Alfred's: those with mailboxes
// and those its Scope names or finds by their hooks.
type Reconciler struct {
	cfg   ReconcilerConfig
	store Store
	inbox Deliverer
	bots  map[string]Bot
	now   func() time.Time
	log   *slog.Logger

	mu         sync.Mutex
	searchedAt map[string]time.Time              // forge → start of the last complete search for assignments
	fullAt     map[string]time.Time              // forge → start of the last complete search from the beginning
	hooked     map[string]map[string]hookVerdict // forge → lower-case repository → what its hooks said
	// derived holds, per forge, the issues whose assignment a search turned into an event,
	// with their updated time then: one that stays untracked (its assignment refused, its
	// mailbox cancelled with the bot still assigned) is not derived again until it changes,
	// so it never takes the place of a missed one in the batch. An issue a complete search from
	// the beginning no longer lists (closed, unassigned) is forgotten.
	derived map[string]map[forge.IssueRef]time.Time
}

// hookVerdict is what a repository's hooks said at a time: whether one points at this Alfred.
type hookVerdict struct {
	ours bool
	at   time.Time
}

// NewReconciler wires a reconciler. inbox stores the derived events (a WakingInbox, so the
// workers apply them at once); store reads and updates the mailboxes; now is the clock (nil:
// time.Now).
func NewReconciler(cfg ReconcilerConfig, store Store, inbox Deliverer, bots map[string]Bot, now func() time.Time, log *slog.Logger) *Reconciler {
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Minute)
	cfg.Batch = cmp.Or(cfg.Batch, 50)
	cfg.Rediscover = cmp.Or(cfg.Rediscover, time.Hour)
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Reconciler{cfg: cfg, store: store, inbox: inbox, bots: bots, now: now, log: log,
		searchedAt: map[string]time.Time{}, fullAt: map[string]time.Time{}, hooked: map[string]map[string]hookVerdict{},
		derived: map[string]map[forge.IssueRef]time.Time{}}
}

// Run makes a pass at once (start-up: what happened while Alfred was down) and then every
// Interval until ctx ends. A pass's mailboxes are spread evenly over the interval.
func (r *Reconciler) Run(ctx context.Context) {
	for {
		start := r.now()
		r.Pass(ctx, r.cfg.Interval)
		wait := r.cfg.Interval - r.now().Sub(start)
		if wait <= 0 {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Pass reconciles every configured forge once, spreading each forge's mailboxes over spread
// (0: back to back), and returns the stats per forge, in forge name order.
func (r *Reconciler) Pass(ctx context.Context, spread time.Duration) []PassStats {
	names := make([]string, 0, len(r.bots))
	for name := range r.bots {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []PassStats
	for _, name := range names {
		st := r.passForge(ctx, name, spread/time.Duration(max(len(names), 1)))
		level := slog.LevelInfo
		if st.Err != nil {
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, "reconciled", "forge", name, "mailboxes", st.Mailboxes, "new_assignments", st.NewAssignments,
			"discovered", st.Discovered, "events", st.Events, "calls", st.Calls, "unattributed", st.Unattributed, "duration", st.Duration, "err", st.Err)
		if r.cfg.OnPass != nil {
			r.cfg.OnPass(st)
		}
		out = append(out, st)
	}
	return out
}

func (r *Reconciler) passForge(ctx context.Context, name string, spread time.Duration) PassStats {
	st := PassStats{Forge: name}
	began := r.now()
	defer func() { st.Duration = r.now().Sub(began) }()
	bot := r.bots[name]
	if err := r.searchAssignments(ctx, name, bot, &st); err != nil {
		st.Err = err
	}
	due, err := r.store.ReconcileDue(ctx, name, r.cfg.Batch)
	if err != nil {
		st.Err = cmp.Or(st.Err, err)
		return st
	}
	gap := time.Duration(0)
	if len(due) > 1 {
		gap = spread / time.Duration(len(due))
	}
	for i := range due {
		if i > 0 && gap > 0 {
			select {
			case <-ctx.Done():
				st.Err = cmp.Or(st.Err, ctx.Err())
				return st
			case <-time.After(gap):
			}
		}
		if err := r.reconcile(ctx, bot, &due[i], &st); err != nil {
			r.log.Warn("reconciling a mailbox failed; the next pass tries again", "mailbox_id", due[i].ID, "err", err)
			st.Err = cmp.Or(st.Err, err)
		}
	}
	return st
}

// searchAssignments stores an assignment event for each issue assigned to the bot that has no
// working mailbox, in a repository of this Alfred's (see ours), reading only issues updated
// since the previous complete search, or all of them once per Rediscover.
func (r *Reconciler) searchAssignments(ctx context.Context, name string, bot Bot, st *PassStats) error {
	started := r.now()
	r.mu.Lock()
	since := r.searchedAt[name]
	full := started.Sub(r.fullAt[name]) >= r.cfg.Rediscover || r.fullAt[name].IsZero()
	if full {
		since = time.Time{}
		for repo, v := range r.hooked[name] { // the cache holds only what a search still names
			if started.Sub(v.at) >= r.cfg.Rediscover {
				delete(r.hooked[name], repo)
			}
		}
	}
	r.mu.Unlock()
	if !since.IsZero() {
		since = since.Add(-time.Minute) // forge clocks and ours differ; the overlap is deduplicated
	}
	known, err := r.store.KnownRepos(ctx, name)
	if err != nil {
		return err
	}
	// Only repositories whose webhooks reach this Alfred: the bot account may be shared with
	// other installations, whose issues are theirs to work on. A repository whose hooks could
	// not be read waits for the next pass, which searches from the same time again; the
	// assignments found elsewhere are not held up by it.
	var unread error
	r.mu.Lock()
	derived := r.derived[name]
	if derived == nil {
		derived = map[forge.IssueRef]time.Time{}
		r.derived[name] = derived
	}
	r.mu.Unlock()
	listed := map[forge.IssueRef]bool{}
	skip := func(is forge.Issue) (bool, error) {
		listed[is.Ref] = true
		ok, err := r.ours(ctx, name, bot, known, is.Ref.Repo, st)
		if err != nil {
			unread = cmp.Or(unread, err)
			return true, nil
		}
		if !ok {
			return true, nil
		}
		tracked, err := r.store.Tracked(ctx, is.Ref)
		if err != nil {
			return false, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if tracked {
			delete(derived, is.Ref)
			return true, nil
		}
		at, seen := derived[is.Ref]
		return seen && at.Equal(is.UpdatedAt), nil
	}
	d, err := DeriveAssignments(ctx, bot.Forge, name, bot.Login, since, r.cfg.Batch, skip, r.now())
	st.Calls += d.Calls
	st.Unattributed += len(d.Unattributed)
	if err != nil {
		return err
	}
	n, err := r.deliver(ctx, d.Events)
	st.NewAssignments += n
	st.Events += n
	if err != nil {
		return err
	}
	r.mu.Lock()
	for _, is := range d.Assigned {
		derived[is.Ref] = is.UpdatedAt
	}
	if full && !d.More && unread == nil { // every assigned issue was listed: forget the others
		for ref := range derived {
			if !listed[ref] {
				delete(derived, ref)
			}
		}
	}
	r.mu.Unlock()
	if unread != nil {
		return unread
	}
	if d.More { // the next pass searches from the same time again for the rest
		return nil
	}
	r.mu.Lock()
	r.searchedAt[name] = started
	if full {
		r.fullAt[name] = started
	}
	r.mu.Unlock()
	return nil
}

// ours reports whether repo, where an issue is assigned to the bot, is this Alfred's: it has
// mailboxes (known, sorted: its deliveries reach this Alfred), the forge's Scope lists it, or
// one of its hooks points at the Scope's HookURL. The hooks are read at most once per
// Rediscover per repository; a bot that may not read them (ErrForbidden, ErrNotFound) makes
// the repository not ours, logged. Any other error of the read is returned and nothing is
// kept: the search is not complete and the next pass reads again.
func (r *Reconciler) ours(ctx context.Context, name string, bot Bot, known []string, repo string, st *PassStats) (bool, error) {
	return r.oursAs(ctx, name, bot, known, repo, st, true)
}

// oursAs is ours; with remember false (the rebuild) what the hooks said is neither kept nor
// logged, so that the pass after it finds, logs and counts the repository as usual.
func (r *Reconciler) oursAs(ctx context.Context, name string, bot Bot, known []string, repo string, st *PassStats, remember bool) (bool, error) {
	if _, ok := slices.BinarySearch(known, repo); ok {
		return true, nil
	}
	scope := r.cfg.Scopes[name]
	if scope.AnyRepository || slices.ContainsFunc(scope.Repositories, func(s string) bool { return strings.EqualFold(s, repo) }) {
		return true, nil
	}
	if scope.HookURL == "" {
		return false, nil
	}
	key := strings.ToLower(repo)
	r.mu.Lock()
	v, cached := r.hooked[name][key]
	r.mu.Unlock()
	if cached && r.now().Sub(v.at) < r.cfg.Rediscover {
		return v.ours, nil
	}
	hooks, err := bot.Forge.Hooks(ctx, repo)
	st.Calls++
	switch {
	case (errors.Is(err, forge.ErrForbidden) || errors.Is(err, forge.ErrNotFound)) && !remember:
	case errors.Is(err, forge.ErrForbidden) || errors.Is(err, forge.ErrNotFound):
		r.log.Info("an issue is assigned to the bot in a repository whose webhooks it may not read; not reconciled until a delivery comes from it or forges[].repositories lists it",
			"forge", name, "repo", repo, "err", err)
	case err != nil:
		return false, fmt.Errorf("reconcile %s: read the hooks of %s: %w", name, repo, err)
	}
	v = hookVerdict{at: r.now(), ours: slices.ContainsFunc(hooks, func(h forge.Hook) bool { return forge.SameHookURL(h.URL, scope.HookURL) })}
	if !remember {
		return v.ours, nil
	}
	if v.ours {
		st.Discovered++
		r.log.Info("a repository that sent no delivery has this Alfred's webhook; its assignments are reconciled",
			"forge", name, "repo", repo)
	}
	r.mu.Lock()
	if r.hooked[name] == nil {
		r.hooked[name] = map[string]hookVerdict{}
	}
	r.hooked[name][key] = v
	r.mu.Unlock()
	return v.ours, nil
}

// Mailbox reconciles one mailbox now (on demand: the status page, a failed pass). It returns
// the events stored.
func (r *Reconciler) Mailbox(ctx context.Context, id int64) (int, error) {
	mb, err := r.store.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	bot, ok := r.bots[mb.Forge]
	if !ok {
		return 0, fmt.Errorf("reconcile mailbox %d: no forge named %s is configured", id, mb.Forge)
	}
	st := PassStats{Forge: mb.Forge}
	err = r.reconcile(ctx, bot, mb, &st)
	return st.Events, err
}

// reconcile compares one mailbox with its forge, stores the derived events and then what was
// seen (so a failure to store an event reads the same changes again next time).
func (r *Reconciler) reconcile(ctx context.Context, bot Bot, mb *Mailbox, st *PassStats) error {
	return r.reconcileWith(ctx, bot, mb, st, false)
}

// reconcileWith is reconcile; reviewComments also derives the review comments of a merge
// request that moved (ReconcileView.ReviewComments, the polling transport).
func (r *Reconciler) reconcileWith(ctx context.Context, bot Bot, mb *Mailbox, st *PassStats, reviewComments bool) error {
	if !mb.State.Working() || mb.MergeRequest {
		return nil
	}
	st.Mailboxes++
	v := ReconcileView{
		MailboxID: mb.ID, Ref: mb.Ref(), Author: mb.Author, Labels: mb.Labels, Assignees: mb.Assignees,
		MRNumber: mb.MRNumber, HeadSHA: mb.HeadSHA,
		IssueUpdatedAt: timeOf(mb.IssueUpdatedAt), MRUpdatedAt: timeOf(mb.MRUpdatedAt),
		CommentsSince: cmp.Or(timeOf(mb.CommentsSince), mb.CreatedAt),
		OwnBody: func(key, body string) bool {
			pc, err := r.store.PostedComment(ctx, mb.ID, key)
			if err != nil || pc == nil {
				return true // unsure, or a comment Alfred has no record of: not acted on
			}
			return pc.Wrote(body)
		},
		ReviewComments: reviewComments,
		Asking:         mb.State == StateWaitingType || mb.State == StateWaitingInfo,
	}
	d, err := DeriveEvents(ctx, bot.Forge, bot.Login, v, r.now())
	st.Calls += d.Calls
	st.Unattributed += len(d.Unattributed)
	for _, what := range d.Unattributed {
		r.log.Warn("a change seen by reconciliation names no author; not acted on", "mailbox_id", mb.ID, "change", what)
	}
	if err != nil {
		// The mailbox goes to the back of the queue with what it had seen (reconciled_at moves,
		// the view's times stay): one that fails at every pass (its project's access lost, an
		// issue the forge fails to answer) must not take the batch from every other mailbox.
		back := r.store.SaveReconciled(ctx, mb.ID, Reconciled{IssueUpdatedAt: nonZero(v.IssueUpdatedAt),
			MRUpdatedAt: nonZero(v.MRUpdatedAt), CommentsSince: nonZero(v.CommentsSince)})
		return errors.Join(err, back)
	}
	n, err := r.deliver(ctx, d.Events)
	st.Events += n
	if err != nil {
		return err
	}
	next := d.CommentsSince
	if next.Before(v.CommentsSince) {
		next = v.CommentsSince
	}
	return r.store.SaveReconciled(ctx, mb.ID, Reconciled{
		IssueUpdatedAt: nonZero(d.IssueUpdatedAt), MRUpdatedAt: nonZero(d.MRUpdatedAt), CommentsSince: &next,
	})
}

// deliver stores the events and returns how many were new.
func (r *Reconciler) deliver(ctx context.Context, evs []forge.Event) (int, error) {
	n := 0
	for _, ev := range evs {
		dup, err := r.inbox.Deliver(ctx, ev)
		var ignore *forge.IgnoreError
		if errors.As(err, &ignore) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("store a reconciled event: %w", err)
		}
		if !dup {
			n++
			r.log.Info("reconciliation found a missed change", "forge", ev.Forge, "target", ev.Target.String(),
				"event", ev.Type, "sender", ev.Sender.Login, "delivery_id", ev.DeliveryID)
		}
	}
	return n, nil
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
