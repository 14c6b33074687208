package forgehttp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Sentinel returns the forge sentinel error that an HTTP status of a forge API answer means, as
// the forge.Forge contract lays down: forge.ErrNotFound for 404, forge.ErrForbidden for 401 and
// 403, forge.ErrConflict for 409 and 422, forge.ErrUnavailable for 408, 429, 5xx and 0 (no
// answer: connection refused, timeout; each retried by CheckRetry first), forge.ErrRefused for
// every other 4xx, and nil for every other status.
func Sentinel(status int) error {
	switch status {
	case http.StatusNotFound:
		return forge.ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return forge.ErrForbidden
	case http.StatusConflict, http.StatusUnprocessableEntity:
		return forge.ErrConflict
	case 0, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return forge.ErrUnavailable
	}
	if status >= 500 {
		return forge.ErrUnavailable
	}
	if status >= 400 && status < 500 {
		return forge.ErrRefused
	}
	return nil
}

// Error is a failed forge API call. errors.Is matches its sentinel (see Sentinel) and its cause
// (for example context.Canceled); Error never contains the token it was built with.
type Error struct {
	forgeName string
	op        string
	status    int
	sentinel  error
	cause     error
	msg       string
}

// NewError builds the error of a failed call: forgeName ("gitlab", "forgejo") and op (a verb
// phrase such as "get issue o/r#1") start its text, status is the HTTP status of the answer (0
// when there was none) and selects the sentinel, and every occurrence of token is removed from
// the text of cause.
func NewError(forgeName, op string, status int, cause error, token string) *Error {
	sentinel := Sentinel(status)
	if status == 0 && (errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded)) {
		sentinel = nil // our own deadline or shutdown, not the forge's state
	}
	return &Error{
		forgeName: forgeName, op: op, status: status, sentinel: sentinel,
		cause: cause, msg: censor.New(censor.Config{Secrets: []string{token}}).String(cause.Error()),
	}
}

// Error reads "<forge>: <op>: <sentinel>: HTTP <status>: <cause>"; the sentinel part is left out
// when the status has none, and the status part when there was no answer or the cause already
// names the status.
func (e *Error) Error() string {
	s := e.forgeName + ": " + e.op + ": "
	if e.sentinel != nil {
		s += e.sentinel.Error() + ": "
	}
	if e.status != 0 && !strings.Contains(e.msg, strconv.Itoa(e.status)) {
		s += "HTTP " + strconv.Itoa(e.status) + ": "
	}
	return s + e.msg
}

// Unwrap returns the sentinel, if any, and the cause.
func (e *Error) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.cause}
	}
	return []error{e.sentinel, e.cause}
}
