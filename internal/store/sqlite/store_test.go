package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/internal/store/sqlstore/sqlstoretest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	sqlstoretest.Run(t, func(t *testing.T, now func() time.Time) *sqlstore.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "alfred.db"), now)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
