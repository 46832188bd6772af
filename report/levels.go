package report

import (
	"context"
	"log/slog"
)

// Diagnostics wraps next so that level applies to diagnostics alone: the
// warnings, the info and the debug lines. The records Log writes as the
// product's output (one line per action and the sweep's summary) pass at
// every level, with the level they carry, because they are the record of
// what died and how: at REAPER_LOG_LEVEL=error a pod deleted without its
// line would leave no trace of its exit fingerprint. One handler below
// writes both kinds, so they share its lock and never interleave.
//
// next must enable whatever the product writes (info and up) and whatever
// level lets through; app builds it so.
func Diagnostics(level slog.Leveler, next slog.Handler) slog.Handler {
	return &levelHandler{next: next, level: level}
}

type levelHandler struct {
	next  slog.Handler
	level slog.Leveler
}

func (h *levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if !isRecord(ctx) && l < h.level.Level() {
		return false
	}
	return h.next.Enabled(ctx, l)
}

func (h *levelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.next.Handle(ctx, r)
}

func (h *levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &levelHandler{next: h.next.WithAttrs(attrs), level: h.level}
}

func (h *levelHandler) WithGroup(name string) slog.Handler {
	return &levelHandler{next: h.next.WithGroup(name), level: h.level}
}

// recordKey marks the context of a product record: slog asks a handler
// whether a level is enabled before the record exists, with the context
// alone, so the context is where Log can say it.
type recordKey struct{}

func asRecord(ctx context.Context) context.Context { return context.WithValue(ctx, recordKey{}, true) }

func isRecord(ctx context.Context) bool {
	v, _ := ctx.Value(recordKey{}).(bool)
	return v
}
