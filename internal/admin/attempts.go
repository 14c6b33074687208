package admin

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The attempts a client may make with a token (AttemptLimits' defaults): a burst of 10 and then
// one every 6 s (10 a minute). A right token guessed past the limit is still refused: only the
// bound on tries matters against guessing. There is no budget shared by every client: a flood
// of wrong tokens from elsewhere would spend it and lock the operator out (issue 26).
const (
	DefaultAttemptsPerAddress = rate.Limit(1.0 / 6)
	DefaultAttemptBurst       = 10
)

// maxAddresses bounds the per-client limiters kept (memory); past it the full ones (no recent
// attempt) are dropped, and if that is not enough all of them: a client then starts afresh,
// which is more lenient, never a lock-out.
const maxAddresses = 10000

// AttemptLimits bounds the tries of a token per client: the connection's remote IP (a
// forwarding proxy's header is not trusted), an IPv6 address by its /64 (one host's usual
// allocation).
type AttemptLimits struct {
	// PerAddress and Burst are one client's rate of attempts and its burst.
	PerAddress rate.Limit
	Burst      int
}

// DefaultAttemptLimits returns the defaults above.
func DefaultAttemptLimits() AttemptLimits {
	return AttemptLimits{PerAddress: DefaultAttemptsPerAddress, Burst: DefaultAttemptBurst}
}

// Attempts counts the tries of a token, one budget per client for every handler given the same
// Attempts (a login form and a Bearer header alike). A try takes one token from its client's
// bucket; a try that succeeds gives it back, so the holder of the right token is never slowed,
// and only failures use the budget. One client's failures never refuse another client. Safe for
// concurrent use.
type Attempts struct {
	l      AttemptLimits
	mu     sync.Mutex
	byAddr map[string]*rate.Limiter
	now    func() time.Time
}

// NewAttempts returns an Attempts with l's limits (zero: DefaultAttemptLimits).
func NewAttempts(l AttemptLimits) *Attempts {
	if l == (AttemptLimits{}) {
		l = DefaultAttemptLimits()
	}
	return &Attempts{l: l, byAddr: map[string]*rate.Limiter{}, now: time.Now}
}

// try is one attempt from r's client. It returns ok=false and how long to wait when the budget
// is spent (the attempt must then be refused unchecked); otherwise done must be called with
// the attempt's outcome.
func (a *Attempts) try(r *http.Request) (done func(success bool), wait time.Duration, ok bool) {
	now := a.now()
	res := a.limiter(clientAddr(r)).ReserveN(now, 1)
	if d := res.DelayFrom(now); !res.OK() || d > 0 {
		res.CancelAt(now)
		return nil, max(d, time.Second), false
	}
	return func(success bool) {
		if success {
			res.CancelAt(now) // at the reservation's own time: a cancel dated later restores nothing
		}
	}, 0, true
}

func (a *Attempts) limiter(addr string) *rate.Limiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l, ok := a.byAddr[addr]; ok {
		return l
	}
	if len(a.byAddr) >= maxAddresses {
		now := a.now()
		for k, l := range a.byAddr {
			if l.TokensAt(now) >= float64(a.l.Burst) {
				delete(a.byAddr, k)
			}
		}
		if len(a.byAddr) >= maxAddresses {
			clear(a.byAddr)
		}
	}
	l := rate.NewLimiter(a.l.PerAddress, a.l.Burst)
	a.byAddr[addr] = l
	return l
}

// clientAddr is the client of r's connection: its IP (RemoteAddr without the port), an IPv6
// address by its /64.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Is4() || ip.Is4In6() {
		return host
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// trackedClients returns how many clients a's budgets track (tests).
func (a *Attempts) trackedClients() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byAddr)
}

// tooManyAttempts answers 429 with Retry-After in whole seconds, rounded up.
func tooManyAttempts(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	http.Error(w, "too many attempts with a wrong token; try again later", http.StatusTooManyRequests)
}
