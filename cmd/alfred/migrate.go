package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/lib/pq" // PostgreSQL driver

	"github.com/alfred-bot/alfred/migrations"
)

// migrate implements "alfred migrate": apply every pending migration.
func (a *app) migrate(ctx context.Context, args []string) (err error) {
	cfg, _, err := a.configOnly("migrate", args)
	if err != nil {
		return err
	}
	db, err := sql.Open("postgres", cfg.DatabaseURL.Reveal())
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("connect to database: %w", err)
	}
	if err := migrations.Apply(ctx, db, migrations.Postgres); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "migrations applied")
	return nil
}
