package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/migrations"
)

// migrate implements "alfred migrate": apply every pending migration to the store database_url
// selects (the embedded SQLite database in data_dir when empty). A SQLite database that a
// running `alfred serve` holds is refused with the reason; serve applies the migrations itself.
func (a *app) migrate(ctx context.Context, args []string) (err error) {
	cfg, _, err := a.configOnly("migrate", args)
	if err != nil {
		return err
	}
	if err := ensureDir(cfg.DataDir); err != nil {
		return fmt.Errorf("create data_dir: %w", err)
	}
	s, err := store.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DataDir, poolOf(cfg.Database), nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	engine, path := store.Engine(cfg.DatabaseURL.Reveal(), cfg.DataDir)
	if engine == migrations.SQLite {
		fmt.Fprintf(a.stdout, "migrations applied (SQLite %s)\n", path)
		return nil
	}
	fmt.Fprintln(a.stdout, "migrations applied (PostgreSQL)")
	return nil
}
