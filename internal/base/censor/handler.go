package censor

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler returns an slog.Handler that censors every record before h sees it: the message,
// every attribute value (those added with Logger.With too, and inside groups), errors by their
// Error text. A non-string value other than a number, bool, time or duration is rendered with
// fmt.Sprint and censored as a string, so a struct that prints a secret cannot slip through.
// With a nil Censor it returns h.
func (c *Censor) Handler(h slog.Handler) slog.Handler {
	if c == nil {
		return h
	}
	return &handler{next: h, c: c}
}

// handler is the slog.Handler returned by Censor.Handler.
type handler struct {
	next slog.Handler
	c    *Censor
}

// Enabled defers to the wrapped handler.
func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle censors r's message and attributes and passes the result on.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.c.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs censors attrs once, when they are attached.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, h.attr(a))
	}
	return &handler{next: h.next.WithAttrs(out), c: h.c}
}

// WithGroup defers to the wrapped handler; group names are not censored.
func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), c: h.c}
}

// attr returns a censored copy of a.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.c.String(v.String()))
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.c.String(err.Error()))
		}
		return slog.String(a.Key, h.c.String(fmt.Sprint(v.Any())))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]slog.Attr, 0, len(attrs))
		for _, g := range attrs {
			out = append(out, h.attr(g))
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
