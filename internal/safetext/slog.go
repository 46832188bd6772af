package safetext

import (
	"context"
	"log/slog"
)

// Handler wraps next so that every record it writes is escaped: the
// message, every attribute's key and string value, those given to
// WithAttrs included, recursively in groups, and the strings inside
// slog.Any values. A log line is read in a terminal or through `kubectl
// logs`, and its attributes quote pods, runner names and servers' errors;
// escaping here means no caller has to remember to. Compose it under the
// redactor (redact, then escape), so that a secret is matched in the text
// as it came.
func Handler(next slog.Handler) slog.Handler { return &handler{next: next} }

type handler struct{ next slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = attr(a)
	}
	return &handler{next: h.next.WithAttrs(clean)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(String(name))}
}

// attr escapes one attribute, resolving LogValuers first so that what they
// produce is escaped too.
func attr(a slog.Attr) slog.Attr {
	key := String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(key, String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = attr(g)
		}
		return slog.Attr{Key: key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		return slog.Any(key, Value(v.Any()))
	default:
		return slog.Attr{Key: key, Value: v}
	}
}
