package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// DefaultSessionTTL is how long an operator's page session lasts after its login.
const DefaultSessionTTL = 12 * time.Hour

// sessionTouchEvery is how stale a session's last_seen may grow before a request renews it: a
// page load writes at most once a minute per session.
const sessionTouchEvery = time.Minute

// OperatorSession is one operator's page session as it is kept: never the id the browser holds
// (the cookie), only its hash, so a copy of the store opens no session.
type OperatorSession struct {
	// IDHash is the hex SHA-256 of the session's random id (the cookie's value).
	IDHash string `db:"id_hash"`
	// Token is the fingerprint of the admin token the session was opened with (TokenFingerprint):
	// a session is valid only under the token in force, so a new token ends every session.
	Token string `db:"token_fingerprint"`
	// CreatedAt is the login; ExpiresAt the end of the session; LastSeenAt its latest use
	// (renewed at most once a minute).
	CreatedAt  time.Time `db:"created_at"`
	ExpiresAt  time.Time `db:"expires_at"`
	LastSeenAt time.Time `db:"last_seen_at"`
}

// OperatorSessions keeps the operators' page sessions. The store implements it (table
// operator_sessions), so every replica sharing the store knows every session and a restart
// signs nobody out; MemorySessions is the one-process implementation of tests and of a
// PageAuth without a store.
type OperatorSessions interface {
	// CreateOperatorSession stores s.
	CreateOperatorSession(ctx context.Context, s OperatorSession) error
	// FindOperatorSession returns the session whose id hashes to idHash, opened with the token
	// whose fingerprint is token and unexpired at now; nil when there is none.
	FindOperatorSession(ctx context.Context, idHash, token string, now time.Time) (*OperatorSession, error)
	// TouchOperatorSession sets the session's last use to at.
	TouchOperatorSession(ctx context.Context, idHash string, at time.Time) error
	// EndOperatorSession deletes the session (logout); none is not an error.
	EndOperatorSession(ctx context.Context, idHash string) error
	// PruneOperatorSessions deletes the sessions expired at now and those opened with another
	// token than the one whose fingerprint is token, and returns how many it deleted.
	PruneOperatorSessions(ctx context.Context, now time.Time, token string) (int64, error)
}

// TokenFingerprint is what a session keeps of the admin token it was opened with: a
// domain-separated SHA-256, never the token.
func TokenFingerprint(token string) string {
	sum := sha256.Sum256([]byte("alfred operator session token\x00" + token))
	return hex.EncodeToString(sum[:])
}

// sessionIDHash is the hash under which the session with the cookie value id is kept.
func sessionIDHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// sessions are the operators' page sessions of one PageAuth: a random id (the cookie) kept as
// its hash in keep, with the fingerprint of the token in force and an expiry. A session is
// valid while unexpired, not ended (logout) and opened with the token in force, so changing the
// token ends every session. A login prunes the expired sessions and those of another token.
type sessions struct {
	keep  OperatorSessions
	token string // the fingerprint of the token in force
	ttl   time.Duration
	now   func() time.Time
}

func newSessions(keep OperatorSessions, token string, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{keep: keep, token: TokenFingerprint(token), ttl: ttl, now: now}
}

// create opens a session and returns its id (the cookie's value) and expiry.
func (s *sessions) create(ctx context.Context) (string, time.Time, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := hex.EncodeToString(b[:])
	now := s.now()
	if _, err := s.keep.PruneOperatorSessions(ctx, now, s.token); err != nil {
		return "", time.Time{}, err
	}
	expires := now.Add(s.ttl)
	err := s.keep.CreateOperatorSession(ctx, OperatorSession{IDHash: sessionIDHash(id), Token: s.token,
		CreatedAt: now, ExpiresAt: expires, LastSeenAt: now})
	if err != nil {
		return "", time.Time{}, err
	}
	return id, expires, nil
}

// valid reports whether id is a live session opened with the token in force, renewing its last
// use when it is older than sessionTouchEvery. An error of the store is an invalid session.
func (s *sessions) valid(ctx context.Context, id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	now := s.now()
	h := sessionIDHash(id)
	se, err := s.keep.FindOperatorSession(ctx, h, s.token, now)
	if err != nil || se == nil {
		return false, err
	}
	if now.Sub(se.LastSeenAt) >= sessionTouchEvery {
		if err := s.keep.TouchOperatorSession(ctx, h, now); err != nil {
			return false, err
		}
	}
	return true, nil
}

// end removes the session id (logout).
func (s *sessions) end(ctx context.Context, id string) error {
	return s.keep.EndOperatorSession(ctx, sessionIDHash(id))
}

// maxMemorySessions bounds the sessions MemorySessions keeps; past it the one closest to its
// expiry is dropped.
const maxMemorySessions = 1000

// MemorySessions keeps sessions in this process's memory: a restart signs every operator out
// and a session is known to one replica only. It serves the tests and a PageAuth without a
// store; `alfred serve` keeps its sessions in the store.
type MemorySessions struct {
	mu   sync.Mutex
	byID map[string]OperatorSession
}

// NewMemorySessions returns an empty MemorySessions.
func NewMemorySessions() *MemorySessions {
	return &MemorySessions{byID: map[string]OperatorSession{}}
}

// CreateOperatorSession implements OperatorSessions.
func (m *MemorySessions) CreateOperatorSession(_ context.Context, s OperatorSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.byID) >= maxMemorySessions {
		oldest := ""
		for h, se := range m.byID {
			if oldest == "" || se.ExpiresAt.Before(m.byID[oldest].ExpiresAt) {
				oldest = h
			}
		}
		delete(m.byID, oldest)
	}
	m.byID[s.IDHash] = s
	return nil
}

// FindOperatorSession implements OperatorSessions.
func (m *MemorySessions) FindOperatorSession(_ context.Context, idHash, token string, now time.Time) (*OperatorSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	se, ok := m.byID[idHash]
	if !ok || se.Token != token || !now.Before(se.ExpiresAt) {
		return nil, nil
	}
	return &se, nil
}

// TouchOperatorSession implements OperatorSessions.
func (m *MemorySessions) TouchOperatorSession(_ context.Context, idHash string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if se, ok := m.byID[idHash]; ok {
		se.LastSeenAt = at
		m.byID[idHash] = se
	}
	return nil
}

// EndOperatorSession implements OperatorSessions.
func (m *MemorySessions) EndOperatorSession(_ context.Context, idHash string) error {
	m.mu.Lock()
	delete(m.byID, idHash)
	m.mu.Unlock()
	return nil
}

// PruneOperatorSessions implements OperatorSessions.
func (m *MemorySessions) PruneOperatorSessions(_ context.Context, now time.Time, token string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for h, se := range m.byID {
		if se.Token != token || !now.Before(se.ExpiresAt) {
			delete(m.byID, h)
			n++
		}
	}
	return n, nil
}

// len returns how many sessions m keeps (tests).
func (m *MemorySessions) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}
