package sqlstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox/storetest"
)

// operatorSessions: a session is found by its id's hash under the token it was opened with
// until it expires; a touch renews its last use; logout deletes it; a prune deletes the expired
// sessions and those of another token (a new admin token drops them all) and keeps the rest.
func operatorSessions(t *testing.T, s *sqlstore.Store, c *storetest.Clock) {
	ctx := context.Background()
	now := c.Now()
	oldTok, newTok := admin.TokenFingerprint("old-admin-token"), admin.TokenFingerprint("new-admin-token")
	mk := func(id, tok string, ttl time.Duration) admin.OperatorSession {
		se := admin.OperatorSession{IDHash: id, Token: tok, CreatedAt: now, ExpiresAt: now.Add(ttl), LastSeenAt: now}
		require.NoError(t, s.CreateOperatorSession(ctx, se))
		return se
	}
	a := mk("aa", oldTok, time.Hour)
	mk("bb", oldTok, 2*time.Hour)
	mk("cc", oldTok, 10*time.Minute)
	require.Error(t, s.CreateOperatorSession(ctx, a), "one row per id hash")

	got, err := s.FindOperatorSession(ctx, "aa", oldTok, now)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Equal(t, "aa", got.IDHash)
	require.Equal(t, oldTok, got.Token)
	require.True(t, got.CreatedAt.Equal(now) && got.ExpiresAt.Equal(now.Add(time.Hour)) && got.LastSeenAt.Equal(now))

	got, err = s.FindOperatorSession(ctx, "zz", oldTok, now)
	require.NoError(t, err)
	require.Nil(t, got, "no such session")
	got, err = s.FindOperatorSession(ctx, "aa", newTok, now)
	require.NoError(t, err)
	require.Nil(t, got, "opened with another token")

	later := now.Add(30 * time.Minute)
	require.NoError(t, s.TouchOperatorSession(ctx, "aa", later))
	got, err = s.FindOperatorSession(ctx, "aa", oldTok, later)
	require.NoError(t, err)
	require.True(t, got.LastSeenAt.Equal(later), "the touch renews the last use")
	got, err = s.FindOperatorSession(ctx, "cc", oldTok, later)
	require.NoError(t, err)
	require.Nil(t, got, "expired")
	got, err = s.FindOperatorSession(ctx, "aa", oldTok, now.Add(time.Hour))
	require.NoError(t, err)
	require.Nil(t, got, "expired at its expiry")

	n, err := s.PruneOperatorSessions(ctx, later, oldTok)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the expired session only")
	require.Equal(t, []string{"aa", "bb"}, operatorSessionIDs(t, s))

	require.NoError(t, s.EndOperatorSession(ctx, "aa"), "logout")
	require.NoError(t, s.EndOperatorSession(ctx, "aa"), "a second logout is no error")
	got, err = s.FindOperatorSession(ctx, "aa", oldTok, later)
	require.NoError(t, err)
	require.Nil(t, got, "logged out")
	require.Equal(t, []string{"bb"}, operatorSessionIDs(t, s))

	mk("dd", oldTok, time.Hour)
	mk("ee", newTok, time.Hour)
	n, err = s.PruneOperatorSessions(ctx, later, newTok)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the token changed: every session of the old one goes")
	require.Equal(t, []string{"ee"}, operatorSessionIDs(t, s))
}

// operatorSessionIDs lists the id hashes of the stored sessions, in order.
func operatorSessionIDs(t *testing.T, s *sqlstore.Store) []string {
	t.Helper()
	var ids []string
	require.NoError(t, s.DB().SelectContext(context.Background(), &ids, `SELECT id_hash FROM operator_sessions ORDER BY id_hash`))
	return ids
}
