// Package webhook is Alfred's inbound HTTP edge: it receives forge webhooks on
// POST /webhooks/{forge}, checks their signature, normalises them into a forge.Event through a
// Source and hands the event to an Inbox, which persists it before the edge answers.
//
// The package knows no forge itself. Sources live in webhook/gitlab and webhook/forgejo and
// satisfy Source without importing this package; the command wires them in by configured forge
// name.
//
// Status codes (GitLab permanently disables a hook after four 4xx answers and temporarily after
// 5xx, so 4xx is kept for real misconfiguration and 5xx for our own outages):
//
//	202 stored                     {"status":"accepted","delivery":"…"}
//	200 duplicate delivery (same delivery id and body) {"status":"duplicate","delivery":"…"}
//	200 ignored (*forge.IgnoreError from the Source or from the Inbox) {"status":"ignored","reason":"…"}
//	400 unreadable payload or missing event header (also a panic while parsing), an identifier
//	    over its cap (MaxDeliveryIDBytes…), or a value the Inbox refuses (forge.ErrBadPayload)
//	401 missing or wrong token/signature (forge.ErrSignature)
//	404 unknown forge name
//	405 method other than POST
//	408 body cut by the server's read timeout (nothing stored; never 2xx)
//	413 body larger than ReceiverConfig.MaxBodyBytes
//	503 the Inbox failed for any other reason (database down), with Retry-After
//
// Before the event reaches the Inbox every string in it is made valid UTF-8 without NUL (an
// invalid byte or a NUL becomes U+FFFD); see normalise.
package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/alfred-bot/alfred/internal/base/httpserve"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Inbox stores normalised events. The mailbox package implements it.
type Inbox interface {
	// Deliver persists ev. It reports duplicate=true, without error, when the same delivery was
	// stored before: same Forge, DeliveryID and BodyHash (a forge's retry). Identical bodies
	// under different delivery ids are different events (assign, unassign, assign again) and
	// are both stored. A *forge.IgnoreError means the event belongs to nothing Alfred tracks
	// (answered 200); an error wrapping forge.ErrBadPayload means it can never be stored (400);
	// any other error means it was not stored and the forge should retry (503).
	Deliver(ctx context.Context, ev forge.Event) (duplicate bool, err error)
}

// Source verifies and parses the deliveries of one forge type. Implementations:
// webhook/gitlab.Source and webhook/forgejo.Source.
type Source interface {
	// Kind returns the forge type the source reads.
	Kind() forge.Kind
	// Verify checks the delivery's token or signature against the raw body. It returns an error
	// wrapping forge.ErrSignature when the check fails; the error never contains the received
	// value.
	Verify(r *http.Request, body []byte) error
	// Parse normalises a verified delivery. It returns a *forge.IgnoreError for deliveries Alfred
	// does not act on and an error wrapping forge.ErrBadPayload for unreadable ones. With an
	// IgnoreError the returned Event still carries DeliveryID, Header and Action when known, for
	// logs. Forge, BodyHash and ReceivedAt are filled by the Receiver.
	Parse(r *http.Request, body []byte) (forge.Event, error)
}

// DefaultMaxBodyBytes is the body cap used when ReceiverConfig.MaxBodyBytes is zero: 5 MiB.
// GitLab caps merge-request payloads well below it; larger bodies get 413.
const DefaultMaxBodyBytes int64 = 5 << 20

// DefaultRetryAfter is the Retry-After sent with a 503 when ReceiverConfig.RetryAfter is zero.
const DefaultRetryAfter = 30 * time.Second

// DefaultDeliverTimeout bounds one Inbox.Deliver call when ReceiverConfig.DeliverTimeout is zero.
const DefaultDeliverTimeout = 10 * time.Second

// ErrDraining is what a ReceiverConfig.Ready returns while the instance drains for an upgrade
// (it claims no new work): /readyz still answers 200, with the body "draining", since the
// instance still stores every delivery: a drain is installation-wide, and a readiness that
// failed on every replica would leave the forges nothing to deliver to (Forgejo never sends a
// delivery again; GitLab disables a hook that keeps failing).
var ErrDraining = errors.New("draining: this instance takes no new work")

// DefaultReadyTimeout bounds one readiness check when ReceiverConfig.ReadyTimeout is zero.
const DefaultReadyTimeout = 2 * time.Second

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Sources maps a configured forge name, the {forge} of POST /webhooks/{forge}, to the Source
	// that reads its deliveries. Names are non-empty and contain no "/". Required.
	Sources map[string]Source
	// Inbox stores the events. Required.
	Inbox Inbox
	// Ready reports whether the service can accept work (database reachable…); GET /readyz
	// answers 503 while it fails. Nil means always ready.
	Ready func(ctx context.Context) error
	// ReadyTimeout bounds one Ready call; zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// MaxBodyBytes caps the request body in bytes; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// DeliverTimeout bounds one Inbox.Deliver call; zero means DefaultDeliverTimeout. The call
	// is not cancelled when the forge closes the connection.
	DeliverTimeout time.Duration
	// RetryAfter is sent (in whole seconds) with a 503 when the Inbox fails; zero means
	// DefaultRetryAfter.
	RetryAfter time.Duration
	// Logger receives one record per request, with the fields forge, delivery_id and event.
	// Nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for Event.ReceivedAt; nil means time.Now. Tests inject a fixed clock.
	Now func() time.Time
}

// Validate reports a configuration the Receiver cannot run with.
func (c ReceiverConfig) Validate() error {
	var errs []error // no source at all is valid: every forge is polled (spec/transport.md), a delivery gets 404
	for name, src := range c.Sources {
		if name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("forge name %q: must be non-empty and contain no '/'", name))
		}
		if src == nil {
			errs = append(errs, fmt.Errorf("forge %q: nil source", name))
		} else if !src.Kind().Valid() {
			errs = append(errs, fmt.Errorf("forge %q: unsupported kind %q", name, src.Kind()))
		}
	}
	if c.Inbox == nil {
		errs = append(errs, errors.New("no inbox configured"))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("max body bytes %d: must not be negative", c.MaxBodyBytes))
	}
	if c.RetryAfter < 0 || c.ReadyTimeout < 0 || c.DeliverTimeout < 0 {
		errs = append(errs, errors.New("retry-after, ready and deliver timeouts must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook receiver config: %w", err)
	}
	return nil
}

// Receiver is the http.Handler of the webhook edge. It serves:
//
//	POST /webhooks/{forge}  a forge delivery (see the package doc for the answers)
//	GET  /healthz           200 "ok" while the process runs
//	GET  /readyz            200 "ok", or 503 "not ready" while ReceiverConfig.Ready fails
//	                        (200 "draining" when its error wraps ErrDraining)
//
// It is safe for concurrent use.
type Receiver struct {
	sources    map[string]Source
	inbox      Inbox
	ready      func(ctx context.Context) error
	readyTO    time.Duration
	deliverTO  time.Duration
	maxBody    int64
	retryAfter time.Duration
	log        *slog.Logger
	now        func() time.Time
	mux        chi.Router
}

// NewReceiver validates cfg, fills its defaults and builds the Receiver.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := &Receiver{
		sources:    make(map[string]Source, len(cfg.Sources)),
		inbox:      cfg.Inbox,
		ready:      cfg.Ready,
		readyTO:    cfg.ReadyTimeout,
		deliverTO:  cfg.DeliverTimeout,
		maxBody:    cfg.MaxBodyBytes,
		retryAfter: cfg.RetryAfter,
		log:        cfg.Logger,
		now:        cfg.Now,
	}
	for name, src := range cfg.Sources {
		rc.sources[name] = src
	}
	if rc.readyTO == 0 {
		rc.readyTO = DefaultReadyTimeout
	}
	if rc.deliverTO == 0 {
		rc.deliverTO = DefaultDeliverTimeout
	}
	if rc.maxBody == 0 {
		rc.maxBody = DefaultMaxBodyBytes
	}
	if rc.retryAfter == 0 {
		rc.retryAfter = DefaultRetryAfter
	}
	if rc.log == nil {
		rc.log = slog.Default()
	}
	if rc.now == nil {
		rc.now = time.Now
	}

	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, response{Status: "error", Error: "not found"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, response{Status: "error", Error: "method not allowed"})
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	r.Get("/readyz", rc.serveReady)
	r.Post("/webhooks/{forge}", rc.serveWebhook)
	rc.mux = r
	return rc, nil
}

// ServeHTTP implements http.Handler.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) { rc.mux.ServeHTTP(w, r) }

// response is the JSON body of every /webhooks answer.
type response struct {
	Status   string `json:"status"`
	Delivery string `json:"delivery,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (rc *Receiver) serveReady(w http.ResponseWriter, r *http.Request) {
	if rc.ready == nil {
		writeText(w, http.StatusOK, "ok")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), rc.readyTO)
	defer cancel()
	if err := rc.ready(ctx); err != nil {
		if errors.Is(err, ErrDraining) {
			writeText(w, http.StatusOK, "draining")
			return
		}
		rc.log.LogAttrs(r.Context(), slog.LevelWarn, "not ready", slog.Any("error", err))
		writeText(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	writeText(w, http.StatusOK, "ok")
}

func (rc *Receiver) serveWebhook(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "forge")
	log := rc.log.With(slog.String("forge", name))
	src, ok := rc.sources[name]
	if !ok {
		log.LogAttrs(r.Context(), slog.LevelWarn, "webhook for unknown forge")
		writeJSON(w, http.StatusNotFound, response{Status: "error", Error: "unknown forge"})
		return
	}

	body, err := rc.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			log.LogAttrs(r.Context(), slog.LevelWarn, "webhook body too large", slog.Int64("limit", rc.maxBody))
			writeJSON(w, http.StatusRequestEntityTooLarge, response{Status: "error", Error: "body too large"})
			return
		}
		log.LogAttrs(r.Context(), slog.LevelWarn, "reading webhook body", slog.Any("error", err))
		// Answered even when the read error ended the request's context: a cut body is never
		// 2xx (a forge takes that as delivered). 408 when the read timeout cut it.
		w.Header().Set("Connection", "close")
		if ne, ok := err.(net.Error); (ok && ne.Timeout()) || errors.Is(err, os.ErrDeadlineExceeded) {
			writeJSON(w, http.StatusRequestTimeout, response{Status: "error", Error: "body cut by the read timeout"})
			return
		}
		writeJSON(w, http.StatusBadRequest, response{Status: "error", Error: "cannot read body"})
		return
	}

	ev, err := verifyAndParse(src, r, body)
	base := log
	if ev.DeliveryID != "" || ev.Header != "" {
		log = base.With(slog.String("delivery_id", ev.DeliveryID), slog.String("event", ev.Header))
	}
	var ignore *forge.IgnoreError
	if errors.As(err, &ignore) {
		if derr := checkDeliveryID(ev.DeliveryID); derr != nil {
			err = derr // ignored or not, an unreadable delivery id is a bad delivery, not echoed
		}
	}
	switch {
	case err == nil:
	case errors.As(err, &ignore):
		log.LogAttrs(r.Context(), slog.LevelInfo, "webhook ignored", slog.String("action", ev.Action), slog.String("reason", ignore.Reason))
		writeJSON(w, http.StatusOK, response{Status: "ignored", Delivery: ev.DeliveryID, Reason: ignore.Reason})
		return
	case errors.Is(err, forge.ErrSignature):
		// The error is built by the source and never holds the received token.
		log.LogAttrs(r.Context(), slog.LevelWarn, "webhook rejected", slog.Any("error", err))
		writeJSON(w, http.StatusUnauthorized, response{Status: "error", Error: "missing or invalid signature"})
		return
	default:
		msg := err.Error()
		var pp *parserPanic
		if errors.As(err, &pp) {
			log.LogAttrs(r.Context(), slog.LevelError, "webhook parser panic", slog.Any("panic", pp.value), slog.String("stack", string(pp.stack)))
			msg = "unreadable payload"
		} else {
			log.LogAttrs(r.Context(), slog.LevelWarn, "webhook payload rejected", slog.Any("error", err))
		}
		writeJSON(w, http.StatusBadRequest, response{Status: "error", Error: msg})
		return
	}

	if err := normalise(&ev); err != nil {
		log.LogAttrs(r.Context(), slog.LevelWarn, "webhook payload rejected", slog.Any("error", err))
		writeJSON(w, http.StatusBadRequest, response{Status: "error", Error: err.Error()})
		return
	}
	ev.Kind = src.Kind()
	markBots(&ev)
	sum := sha256.Sum256(body)
	ev.Forge = name
	ev.BodyHash = hex.EncodeToString(sum[:])
	if ev.DeliveryID == "" {
		// No delivery header (hand-sent or recorded without headers): the body identifies it.
		ev.DeliveryID = ev.BodyHash
	}
	ev.Target.Forge = name
	ev.ReceivedAt = rc.now().UTC()
	rc.store(w, r, base.With(slog.String("delivery_id", ev.DeliveryID), slog.String("event", ev.Header)), ev)
}

// store hands a verified, normalised event to the Inbox and answers by the result (see the
// package doc).
func (rc *Receiver) store(w http.ResponseWriter, r *http.Request, log *slog.Logger, ev forge.Event) {
	// Once storing has started it should finish even if the forge hangs up (GitLab gives up
	// after 10 s, Gitea after 5 s): a half-done store only causes a needless retry.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), rc.deliverTO)
	defer cancel()
	dup, err := rc.inbox.Deliver(ctx, ev)
	var ignore *forge.IgnoreError
	switch {
	case errors.As(err, &ignore):
		// Decided by the store: a pipeline on no branch of Alfred's, say.
		log.LogAttrs(r.Context(), slog.LevelInfo, "webhook ignored", slog.String("action", ev.Action), slog.String("reason", ignore.Reason))
		writeJSON(w, http.StatusOK, response{Status: "ignored", Delivery: ev.DeliveryID, Reason: ignore.Reason})
		return
	case errors.Is(err, forge.ErrBadPayload):
		// The store refused a value (the normalisation should have caught it): retrying the same
		// delivery cannot succeed.
		log.LogAttrs(r.Context(), slog.LevelWarn, "webhook payload not storable", slog.Any("error", err))
		writeJSON(w, http.StatusBadRequest, response{Status: "error", Error: "payload cannot be stored"})
		return
	case err != nil:
		log.LogAttrs(r.Context(), slog.LevelError, "storing webhook event", slog.Any("error", err))
		w.Header().Set("Retry-After", strconv.Itoa(int((rc.retryAfter+time.Second-1)/time.Second)))
		writeJSON(w, http.StatusServiceUnavailable, response{Status: "error", Error: "temporarily unavailable"})
		return
	}
	attrs := []slog.Attr{
		slog.String("type", string(ev.Type)), slog.String("action", ev.Action),
		slog.String("repo", ev.Target.Repo), slog.Int64("issue", ev.Target.Number),
	}
	if dup {
		log.LogAttrs(r.Context(), slog.LevelInfo, "webhook duplicate", attrs...)
		writeJSON(w, http.StatusOK, response{Status: "duplicate", Delivery: ev.DeliveryID})
		return
	}
	log.LogAttrs(r.Context(), slog.LevelInfo, "webhook accepted", attrs...)
	writeJSON(w, http.StatusAccepted, response{Status: "accepted", Delivery: ev.DeliveryID})
}

// readBody reads the whole body, at most rc.maxBody bytes; a larger body gives an error that is
// an *http.MaxBytesError. A body the server's httpserve.Stages read whole already is taken as it
// is, without a copy.
func (rc *Receiver) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > rc.maxBody {
		return nil, &http.MaxBytesError{Limit: rc.maxBody}
	}
	if r.Body == nil {
		return nil, nil
	}
	if b, ok := r.Body.(*httpserve.Body); ok {
		if body := b.Unread(); int64(len(body)) <= rc.maxBody {
			return body, nil
		}
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, rc.maxBody))
}

// verifyAndParse runs the source and turns a panic into a bad-payload error: input must never
// cause a 5xx.
func verifyAndParse(src Source, r *http.Request, body []byte) (ev forge.Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			ev = forge.Event{}
			err = &parserPanic{value: p, stack: debug.Stack()}
		}
	}()
	if err := src.Verify(r, body); err != nil {
		return forge.Event{}, err
	}
	return src.Parse(r, body)
}

// parserPanic is a panic recovered from a Source; it counts as a bad payload (400).
type parserPanic struct {
	value any
	stack []byte
}

func (p *parserPanic) Error() string {
	return fmt.Sprintf("%v: parser panic: %v", forge.ErrBadPayload, p.value)
}
func (p *parserPanic) Unwrap() error { return forge.ErrBadPayload }

func writeJSON(w http.ResponseWriter, status int, v response) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeText(w http.ResponseWriter, status int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, s)
}
