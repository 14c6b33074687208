package postgres_test

import (
	"testing"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/store/sqlstore/sqlstoretest"
)

// BenchmarkBackgroundQueries is sqlstoretest.BenchBackground on PostgreSQL: every statement
// Alfred issues on its own at 10 and 100,000 mailboxes, each size in its own schema.
func BenchmarkBackgroundQueries(b *testing.B) {
	sqlstoretest.BenchBackground(b, func(b *testing.B) *sqlstore.Store { return newBenchStore(b) })
}

// BenchmarkIngestRounds is sqlstoretest.BenchIngestRounds on PostgreSQL.
func BenchmarkIngestRounds(b *testing.B) {
	sqlstoretest.BenchIngestRounds(b, newBenchStore(b))
}

// newBenchStore returns a store on a new, migrated schema of its own.
func newBenchStore(b *testing.B) *sqlstore.Store {
	db, _ := pgtest.New(b)
	return postgres.New(db, nil)
}
