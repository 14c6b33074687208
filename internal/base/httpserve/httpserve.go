// Package httpserve builds Alfred's HTTP servers with their limits: header, body, write and
// idle timeouts, a header size cap, and two stages for every request with a body: reading it
// (into memory, capped, with its own bound on readers and on the bytes held), then handling
// it (a bounded number at once). A client that sends its body slowly holds a reader, never a
// handling slot, so slow clients cannot delay the answer to a delivery that arrived whole
// (spec/edge.md, "Slow clients").
package httpserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Limits bounds what one client can hold. Every field is required (positive).
type Limits struct {
	// ReadHeaderTimeout bounds reading the request line and headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the whole request, body included; a client sending its body
	// slowly is cut off when it passes. It also bounds the waits for a reader, for memory and
	// for a handling slot (then 503 with Retry-After).
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end of its answer.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request headers.
	MaxHeaderBytes int
	// MaxConcurrent is how many requests are handled at once (their events stored), their
	// bodies already read; the others wait for a slot.
	MaxConcurrent int
	// MaxReaders is how many request bodies are read at once, before handling; a reader holds
	// a goroutine, its connection and the bytes received so far, nothing else.
	MaxReaders int
	// MaxBodyBytes is the most of a body the reading stage reads; past it (one byte more) the
	// handler gets what was read followed by the rest of the connection, and answers by its
	// own cap (the receiver's 413). A body declared larger is not read at all.
	MaxBodyBytes int64
	// BodyMemory caps the bytes of request bodies held at once, being read or waiting for a
	// handling slot (buffers counted by their capacity); raised to MaxBodyBytes+1 when
	// smaller, so that one largest body always fits.
	BodyMemory int64
}

// Stats is what a Server's stages hold at one instant.
type Stats struct {
	// Reading counts requests whose body is being read (or waiting for a reader or memory).
	Reading int64
	// Waiting counts requests read whole that wait for a handling slot.
	Waiting int64
	// Handling counts requests in their handler: at most Limits.MaxConcurrent.
	Handling int64
	// BodyBytes is the memory the stages hold for bodies, in bytes.
	BodyBytes int64
}

// Server is an http.Server whose handler runs behind the two stages; Stats reads them.
type Server struct {
	*http.Server
	stages *Stages
}

// Stats returns what the stages hold now.
func (s *Server) Stats() Stats { return s.stages.Stats() }

// New returns a server for h with the limits applied (NewStages wraps h).
func New(l Limits, h http.Handler) *Server {
	st := NewStages(l, h)
	return &Server{Server: &http.Server{
		Handler:           st,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}, stages: st}
}

// Stages is the handler of a Server: the reading stage, then Limit's handling slots.
type Stages struct {
	h        http.Handler
	wait     time.Duration
	maxBody  int64
	readers  chan struct{}
	memory   *semaphore.Weighted
	slots    chan struct{}
	reading  atomic.Int64
	waiting  atomic.Int64
	handling atomic.Int64
	held     atomic.Int64
}

// NewStages wraps h in the reading stage and the handling slots of l (ReadTimeout bounds
// every wait). A request without a body goes straight to the handling slots.
func NewStages(l Limits, h http.Handler) *Stages {
	mem := max(l.BodyMemory, l.MaxBodyBytes+1)
	return &Stages{h: h, wait: l.ReadTimeout, maxBody: l.MaxBodyBytes,
		readers: make(chan struct{}, max(l.MaxReaders, 1)), memory: semaphore.NewWeighted(mem),
		slots: make(chan struct{}, max(l.MaxConcurrent, 1))}
}

// Stats returns what the stages hold now.
func (s *Stages) Stats() Stats {
	return Stats{Reading: s.reading.Load(), Waiting: s.waiting.Load(), Handling: s.handling.Load(),
		BodyBytes: s.held.Load()}
}

// errSaturated is a wait for a reader, memory or a slot that ran out.
var errSaturated = errors.New("httpserve: saturated")

// ServeHTTP reads r's body whole (at most MaxBodyBytes+1 bytes), then waits for a handling
// slot and runs the handler with the body from memory. A body that cannot be read is answered
// without a handling slot, never 2xx: 408 when the read timeout cut it, 400 otherwise (the
// client went away, a malformed chunk); a wait that runs out, or that the client ends, is
// answered 503 with "Retry-After: 1" (nothing was handled or stored).
func (s *Stages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if hasBody(r) && r.ContentLength <= s.maxBody {
		body, held, err := s.read(r)
		defer s.release(held)
		switch {
		case errors.Is(err, errSaturated):
			saturated(w, "too many requests being read")
			return
		case err != nil:
			// Answered even when the read error ended the request's context (net/http cancels
			// it on a read error): left unwritten, the answer would be 200 with an empty body,
			// which a forge takes as delivered. A client that went away reads nothing.
			bodyReadError(w, err)
			return
		}
		if int64(len(body)) > s.maxBody {
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		} else {
			r.Body = &Body{Reader: bytes.NewReader(body), data: body}
		}
	}
	s.waiting.Add(1)
	err := acquire(r.Context(), s.slots, s.wait)
	s.waiting.Add(-1)
	if err != nil {
		// Answered even when the request's context ended (the client half-closed, net/http
		// cancels it): left unwritten, the answer would be 200, and nothing was handled.
		saturated(w, "too many requests in progress")
		return
	}
	defer func() { <-s.slots }()
	s.handling.Add(1)
	defer s.handling.Add(-1)
	s.h.ServeHTTP(w, r)
}

// bodyReadError answers a body that could not be read whole: 408 when the read timed out (the
// server's ReadTimeout cut it), 400 otherwise; the connection is closed after the answer.
func bodyReadError(w http.ResponseWriter, err error) {
	w.Header().Set("Connection", "close")
	if ne, ok := err.(net.Error); (ok && ne.Timeout()) || errors.Is(err, os.ErrDeadlineExceeded) {
		http.Error(w, "the request body did not arrive within the read timeout", http.StatusRequestTimeout)
		return
	}
	http.Error(w, "cannot read the request body", http.StatusBadRequest)
}

// hasBody reports whether r may carry a body to read.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// chunk is the least a body buffer grows by.
const chunk = 4 << 10

// read reads r's body into a buffer that grows as bytes arrive (so a slow client holds only
// what it sent), each growth taken from the memory budget first. It stops after MaxBodyBytes+1
// bytes (the declared length + 1 when known, to see its end). held is the memory taken, to
// release once the request is answered.
func (s *Stages) read(r *http.Request) (body []byte, held int64, err error) {
	ctx := r.Context()
	s.reading.Add(1)
	defer s.reading.Add(-1)
	if err := acquire(ctx, s.readers, s.wait); err != nil {
		return nil, 0, err
	}
	defer func() { <-s.readers }()
	limit := s.maxBody + 1
	if r.ContentLength > 0 {
		limit = r.ContentLength + 1
	}
	var buf []byte
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			grow := min(max(int64(cap(buf)), chunk), limit-int64(cap(buf)))
			if err := s.take(ctx, grow); err != nil {
				return nil, held, err
			}
			held += grow
			buf = append(make([]byte, 0, int64(cap(buf))+grow), buf...)
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
	return buf, held, nil
}

// take reserves n bytes of the memory budget, waiting at most s.wait.
func (s *Stages) take(ctx context.Context, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()
	if err := s.memory.Acquire(ctx, n); err != nil {
		return errSaturated
	}
	s.held.Add(n)
	return nil
}

func (s *Stages) release(n int64) {
	if n > 0 {
		s.held.Add(-n)
		s.memory.Release(n)
	}
}

// acquire takes a place in sem, waiting while the client is connected, at most wait.
func acquire(ctx context.Context, sem chan struct{}, wait time.Duration) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errSaturated
	}
}

func saturated(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(1))
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// Body is a request body Stages read whole, within MaxBodyBytes: a handler reads it as any
// body, or takes it at once with Unread, without copying it.
type Body struct {
	*bytes.Reader
	data []byte
}

// Unread returns the bytes of the body not read yet. They are Stages' buffer, not a copy: the
// handler must not keep them after it returns.
func (b *Body) Unread() []byte { return b.data[len(b.data)-b.Len():] }

// Close does nothing: the body is in memory.
func (b *Body) Close() error { return nil }

// readCloser reads from r and closes c (the request's own body).
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }
