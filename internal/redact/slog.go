package redact

import (
	"context"
	"log/slog"
)

// Handler wraps next so that every record it writes is redacted: the
// message and every attribute value, those given to WithAttrs included,
// recursively in groups. Log lines are where an echoed error would
// otherwise travel furthest, so no caller has to remember to redact.
func (s *Set) Handler(next slog.Handler) slog.Handler {
	return &handler{next: next, set: s}
}

type handler struct {
	next slog.Handler
	set  *Set
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.set.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.set.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.set.attr(a)
	}
	return &handler{next: h.next.WithAttrs(clean), set: h.set}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), set: h.set}
}

// attr redacts one attribute's value, resolving LogValuers first so that
// what they produce is redacted too.
func (s *Set) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, s.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = s.attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		return slog.Any(a.Key, s.Value(v.Any()))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
