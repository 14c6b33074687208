package admin

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The login attempts PageAuth allows (AttemptLimits' defaults): per client address a burst of
// 10 and then one every 6 s (10 a minute); for all addresses together a burst of 60 and then
// 2 a second. A right token guessed under the limit is still refused: only the bound on tries
// matters against guessing.
const (
	DefaultAttemptsPerAddress = rate.Limit(1.0 / 6)
	DefaultAttemptBurst       = 10
	DefaultAttemptsOverall    = rate.Limit(2)
	DefaultOverallBurst       = 60
)

// maxAddresses bounds the per-address limiters kept; past it the full ones (no recent
// attempt) are dropped, and if that is not enough all of them.
const maxAddresses = 10000

// AttemptLimits bounds the tries of a token: per client address (the connection's remote IP;
// a forwarding proxy's header is not trusted) and for all addresses together.
type AttemptLimits struct {
	// PerAddress and Burst are one address's rate of attempts and its burst.
	PerAddress rate.Limit
	Burst      int
	// Overall and OverallBurst are the same for every address together.
	Overall      rate.Limit
	OverallBurst int
}

// DefaultAttemptLimits returns the defaults above.
func DefaultAttemptLimits() AttemptLimits {
	return AttemptLimits{PerAddress: DefaultAttemptsPerAddress, Burst: DefaultAttemptBurst,
		Overall: DefaultAttemptsOverall, OverallBurst: DefaultOverallBurst}
}

// attempts counts the tries of a token. A try takes one token from its address's bucket and,
// when overall is set, from the shared one; a try that succeeds gives them back, so the
// holder of the right token is never slowed, and only failures use the budget.
type attempts struct {
	l       AttemptLimits
	overall *rate.Limiter
	mu      sync.Mutex
	byAddr  map[string]*rate.Limiter
	now     func() time.Time
}

func newAttempts(l AttemptLimits) *attempts {
	return &attempts{l: l, overall: rate.NewLimiter(l.Overall, l.OverallBurst),
		byAddr: map[string]*rate.Limiter{}, now: time.Now}
}

// try is one attempt from r's address; shared says whether it counts against the overall
// budget too. It returns ok=false and how long to wait when the budget is spent (the attempt
// must then be refused unchecked); otherwise done must be called with the attempt's outcome.
func (a *attempts) try(r *http.Request, shared bool) (done func(success bool), wait time.Duration, ok bool) {
	now := a.now()
	res := []*rate.Reservation{a.limiter(clientAddr(r)).ReserveN(now, 1)}
	if shared {
		res = append(res, a.overall.ReserveN(now, 1))
	}
	for _, x := range res {
		if d := x.DelayFrom(now); !x.OK() || d > 0 {
			for _, y := range res {
				y.CancelAt(now)
			}
			return nil, max(d, time.Second), false
		}
	}
	return func(success bool) {
		if success {
			// At the reservation's own time: a cancel dated later restores nothing.
			for _, x := range res {
				x.CancelAt(now)
			}
		}
	}, 0, true
}

func (a *attempts) limiter(addr string) *rate.Limiter {
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

// clientAddr is the IP of r's connection (RemoteAddr without the port).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tooManyAttempts answers 429 with Retry-After in whole seconds, rounded up.
func tooManyAttempts(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	http.Error(w, "too many attempts with a wrong token; try again later", http.StatusTooManyRequests)
}
