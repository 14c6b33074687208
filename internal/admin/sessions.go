package admin

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// DefaultSessionTTL is how long an operator's page session lasts after its login.
const DefaultSessionTTL = 12 * time.Hour

// maxSessions bounds the sessions kept (memory); past it the expired ones are dropped, and if
// that is not enough the one closest to its expiry.
const maxSessions = 1000

// sessions are the operators' page sessions, kept in this process's memory: a random id (the
// cookie), the hash of the token it was opened with, and its expiry. A session is valid while
// unexpired, not ended (logout) and opened with the token in force, so changing the token ends
// every session. Memory, not the store: a restart signs every operator out, and with several
// replicas a session is known to the replica that opened it only (spec/security.md).
type sessions struct {
	ttl  time.Duration
	now  func() time.Time
	mu   sync.Mutex
	byID map[string]session
}

type session struct {
	token   [32]byte // sha256 of the token the login presented
	expires time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, byID: map[string]session{}}
}

// create opens a session for the token whose hash is token and returns its id and expiry.
func (s *sessions) create(token [32]byte) (string, time.Time, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := hex.EncodeToString(b[:])
	now := s.now()
	expires := now.Add(s.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= maxSessions {
		s.evict(now)
	}
	s.byID[id] = session{token: token, expires: expires}
	return id, expires, nil
}

// evict drops the expired sessions, or else the one closest to its expiry. s.mu is held.
func (s *sessions) evict(now time.Time) {
	oldest, first := "", time.Time{}
	for id, se := range s.byID {
		if !now.Before(se.expires) {
			delete(s.byID, id)
			continue
		}
		if oldest == "" || se.expires.Before(first) {
			oldest, first = id, se.expires
		}
	}
	if len(s.byID) >= maxSessions {
		delete(s.byID, oldest)
	}
}

// valid reports whether id is a live session opened with the token whose hash is inForce.
func (s *sessions) valid(id string, inForce [32]byte) bool {
	s.mu.Lock()
	se, ok := s.byID[id]
	if ok && !s.now().Before(se.expires) {
		delete(s.byID, id)
		ok = false
	}
	s.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(se.token[:], inForce[:]) == 1
}

// end removes the session id (logout).
func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}
