package mailbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// ClosedMailbox is a closed mailbox that still holds texts retention may purge.
type ClosedMailbox struct {
	ID       int64     `db:"id"`
	Forge    string    `db:"forge"`
	Repo     string    `db:"repo"`
	ClosedAt time.Time `db:"closed_at"`
}

// RetentionStore is what the retention sweep needs from the store.
type RetentionStore interface {
	// Purgeable lists the mailboxes closed before before that Purge has not purged since they
	// last changed (their events, run logs, outputs and question contexts may remain), oldest
	// first. It reads those mailboxes only, not the ones purged before.
	Purgeable(ctx context.Context, before time.Time) ([]ClosedMailbox, error)
	// Purge deletes the mailbox's events and blanks its runs' logs and outputs and its
	// questions' context, keeping the mailbox, the runs' phases, times and outcomes, the
	// answers and the session records (tokens, cost), and records the purge (Purgeable leaves
	// the mailbox out until it changes again). A mailbox reopened since is left alone.
	Purge(ctx context.Context, mailboxID int64) error
}

// Retention purges the texts of closed mailboxes once their project's retention_days have
// passed since they closed. Session state is not its business: it is removed when the mailbox
// closes.
type Retention struct {
	// Store lists and purges; required.
	Store RetentionStore
	// Days returns retention_days for a repository (its scope's, else the global value); 0
	// keeps everything.
	Days func(repo string) int
	// MinDays is the shortest retention_days above 0 of any scope (MinRetentionDays): no
	// mailbox closed since is past its retention, so the sweep asks the store only for those
	// closed before. 0 asks for every closed mailbox not purged yet.
	MinDays int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger logs each purge; nil discards.
	Logger *slog.Logger
}

// Sweep purges every mailbox past its retention and returns how many it purged. Errors of
// single mailboxes are joined; the others are still purged.
func (r *Retention) Sweep(ctx context.Context) (int, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := now()
	list, err := r.Store.Purgeable(ctx, t.Add(-daysDuration(r.MinDays)))
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, mb := range list {
		days := r.Days(mb.Repo)
		if days <= 0 || t.Sub(mb.ClosedAt) < daysDuration(days) {
			continue
		}
		if err := r.Store.Purge(ctx, mb.ID); err != nil {
			errs = append(errs, fmt.Errorf("purge mailbox %d: %w", mb.ID, err))
			continue
		}
		n++
		log.Info("retention: purged the events, run logs and outputs of a closed mailbox",
			"mailbox_id", mb.ID, "repo", mb.Repo, "closed_at", mb.ClosedAt, "retention_days", days)
	}
	return n, errors.Join(errs...)
}

// MinRetentionDays returns the smallest of days above 0 (the global retention_days and each
// scope's), 0 when none is: then nothing is ever purged and no sweep needs to run.
func MinRetentionDays(days ...int) int {
	least := 0
	for _, d := range days {
		if d > 0 && (least == 0 || d < least) {
			least = d
		}
	}
	return least
}

// Run sweeps every interval until ctx ends, logging failures.
func (r *Retention) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil && r.Logger != nil {
			r.Logger.Warn("retention sweep incomplete; the next one tries again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// daysDuration is days as a duration, saturated at the longest one instead of overflowing
// into a negative age (106,751 days; the configuration allows 36,500).
func daysDuration(days int) time.Duration {
	const day = 24 * time.Hour
	if days > int(math.MaxInt64/day) {
		return math.MaxInt64
	}
	return time.Duration(days) * day
}
