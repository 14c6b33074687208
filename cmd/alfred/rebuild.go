package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// rebuild implements "alfred rebuild": the mailbox of every open issue assigned to a bot, in a
// repository of this Alfred's, that the store lacks is rebuilt from what Alfred left on the
// forge (spec/reliability.md, "Rebuild from the forge"). Issues with a mailbox are left as
// they are, so it can run again. With SQLite, `alfred serve` must be stopped (it holds the
// database); on PostgreSQL it may run beside it.
func (a *app) rebuild(ctx context.Context, args []string) error {
	cfg, _, err := a.configOnly("rebuild", args)
	if err != nil {
		return err
	}
	a.censor = cfg.Censor()
	log := slog.New(cfg.Censor().Handler(slog.NewTextHandler(a.stderr, nil)))
	srv, err := newServer(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	empty, err := srv.store.Empty(ctx)
	if err != nil {
		return err
	}
	if empty {
		// The new mailboxes' ids may be the lost ones of other issues: what the lost store's
		// runs left under those ids (containers, worktrees, session state) goes first, as at
		// the start-up of serve.
		if err := srv.reap(ctx); err != nil {
			return fmt.Errorf("remove what the lost store's runs left: %w", err)
		}
	}
	stats, err := srv.recon.Rebuild(ctx, srv.store, srv.lifecycle)
	for _, st := range stats {
		fmt.Fprintf(a.stdout, "%s: %d open issues assigned to the bot, %d mailboxes rebuilt, %d already there, %d skipped\n",
			st.Forge, st.Issues, st.Rebuilt, st.Existing, st.Skipped)
	}
	return err
}

// rebuildIfEmpty rebuilds the mailboxes from the forge when the store held none at start-up
// (empty, read before the webhook port took a delivery: a new or lost database). While a forge
// is unavailable it tries again, every rebuildRetry, until ctx ends: the workers start only
// after it, or they would take the issues Alfred works on for new assignments (deliveries are
// stored meanwhile and applied after it). Another failure (one issue that cannot be read back)
// is logged; the other issues are rebuilt and `alfred rebuild` tries the rest again.
func (s *server) rebuildIfEmpty(ctx context.Context, empty bool) error {
	if !empty {
		return nil // the store has mailboxes
	}
	s.log.Info("the store is empty: rebuilding the mailboxes of the open issues assigned to the bot from the forge")
	_, err := s.recon.Rebuild(ctx, s.store, s.lifecycle)
	for errors.Is(err, forge.ErrUnavailable) {
		s.log.Warn("the rebuild from the forge waits for the forge", "err", err, "retry_in", rebuildRetry)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rebuildRetry):
		}
		_, err = s.recon.Rebuild(ctx, s.store, s.lifecycle) // what is rebuilt already is kept
	}
	if err != nil {
		s.log.Warn("the rebuild from the forge is incomplete; `alfred rebuild` tries the issues left again", "err", err)
	}
	return nil
}

// rebuildRetry is the wait between two attempts of the start-up rebuild while a forge is
// unavailable.
const rebuildRetry = 10 * time.Second
