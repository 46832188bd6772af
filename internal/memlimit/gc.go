package memlimit

import (
	"log/slog"
	"strconv"
)

// GOGC is the variable through which an operator sets the collector's pace
// themselves; the runtime reads it at start-up.
const GOGC = "GOGC"

// GCPercent is the collector's pace when GOGC is unset. A sweep's heap is
// mostly views that stay live until it ends, and the runtime's default
// (100) lets the garbage of the lists grow the heap to twice what is live
// before it collects: the peak. At 10 it collects at one and a tenth
// times. Measured (make bench, same worlds, sweeps in turn), 100 to 50 at
// 100,000 runners: a warm sweep's peak 213 [200-221] to 186 [185-187] MiB,
// for CPU within the spread (8.7 to 8.8 s); 50 to 25 at 30,000: 81.0
// [79.5-81.1] to 72.0 [71.2-75.6] MiB warm and 76.8 to 68.0 cold, for CPU
// within the spread. 25 to 10, once the binary no longer linked the OTLP
// SDK: at 100,000 runners 108.8 [107.4-111.3] to 100.4 [100.3-101.2] MiB
// warm and 104.0 to 96.4 cold, for 8.6 [8.5-9.6] against 9.7 [9.3-10.1] s
// of CPU; at 30,000, 50.0 to 46.9 MiB for 2.1 against 2.4 s; at 10,000,
// 33.2 to 32.3 MiB for the same CPU (0.78 and 0.74 s). The memory is what
// a limit kills a sweep for; GOGC=25 in the environment buys the CPU back.
const GCPercent = 10

// ServeGCPercent is the collector's pace of the long-running mode
// (`runner-reaper serve`) when GOGC is unset: the runtime's own default.
// There what is live is the watches' stores, held between sweeps, while
// every watch event decoded and every sweep's views are garbage soon
// after; at GCPercent the collector would run each time a tenth of the
// stores had been allocated again, all day, for a peak the soft limit
// (Setup) bounds anyway.
const ServeGCPercent = 100

// Where the collector's pace in force came from, as logged (gogc_source).
const (
	// GCFromEnv: the operator set GOGC, and it stands.
	GCFromEnv = "env"
	// GCFromDefault: GCPercent, set here.
	GCFromDefault = "default"
)

// GCDecision is what ApplyGCAt decided, logged at start-up through Attrs.
type GCDecision struct {
	// GOGC is the pace in force, as GOGC would say it: a percentage, or
	// the operator's own value ("off" included).
	GOGC string
	// Source is GCFromEnv or GCFromDefault.
	Source string
}

// Attrs are the keys the start-up line adds for the collector's pace.
func (d GCDecision) Attrs() []slog.Attr {
	return []slog.Attr{slog.String("gogc", d.GOGC), slog.String("gogc_source", d.Source)}
}

// ApplyGCAt sets the collector's pace to percent (a sweep's GCPercent,
// the long-running mode's ServeGCPercent) unless the environment sets
// GOGC: the operator chose it (a larger one trades memory for CPU), and
// the runtime has already applied it. An empty GOGC the runtime reads as
// unset, and so does ApplyGCAt. Without SetGCPercent it decides and
// changes nothing. Call it once, at start-up, before anything large is
// allocated.
func (h Host) ApplyGCAt(percent int) GCDecision {
	if v, ok := h.lookupEnv(GOGC); ok && v != "" {
		// The runtime reads a GOGC that is neither "off" nor a number
		// as its default, 100: the line says the pace in force, not
		// the typo.
		if _, err := strconv.ParseInt(v, 10, 32); err != nil && v != "off" {
			v = "100"
		}
		return GCDecision{GOGC: v, Source: GCFromEnv}
	}
	if h.SetGCPercent != nil {
		h.SetGCPercent(percent)
	}
	return GCDecision{GOGC: strconv.Itoa(percent), Source: GCFromDefault}
}
