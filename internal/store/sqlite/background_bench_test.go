package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/store/sqlstore/sqlstoretest"
)

// BenchmarkBackgroundQueries is sqlstoretest.BenchBackground on SQLite: every statement
// Alfred issues on its own at 10 and 100,000 mailboxes, each size in its own database file.
func BenchmarkBackgroundQueries(b *testing.B) {
	sqlstoretest.BenchBackground(b, newBenchStore)
}

// BenchmarkIngestRounds is sqlstoretest.BenchIngestRounds on SQLite: the cost of a delivery
// (stored, read back as pending, marked processed) in a fresh database and after 20,000 and
// 40,000 processed events in the same mailboxes; ratio = third round / first.
func BenchmarkIngestRounds(b *testing.B) {
	sqlstoretest.BenchIngestRounds(b, newBenchStore(b))
}

// newBenchStore returns a store on a new database file of its own, closed when b ends.
func newBenchStore(b *testing.B) *sqlstore.Store {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "alfred.db"), nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return s
}
