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
// before it collects: the peak. At 50 it collects at one and a half times.
// Measured at 100,000 runners (make bench, same world, sweeps in turn): a
// warm sweep's peak 213 [200-221] to 186 [185-187] MiB, a cold one's 207 to
// 172, for CPU within the spread (8.7 [8.0-9.0] to 8.8 [8.2-9.0] s); at
// 10,000 and 30,000 the peak fell 3 to 5 MiB for 5-13% more CPU.
const GCPercent = 50

// Where the collector's pace in force came from, as logged (gogc_source).
const (
	// GCFromEnv: the operator set GOGC, and it stands.
	GCFromEnv = "env"
	// GCFromDefault: GCPercent, set here.
	GCFromDefault = "default"
)

// GCDecision is what ApplyGC decided, logged at start-up with Decision.
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

// ApplyGC sets the collector's pace to GCPercent unless the environment
// sets GOGC: the operator chose it (a larger one trades memory for CPU),
// and the runtime has already applied it. An empty GOGC the runtime reads
// as unset, and so does ApplyGC. Without SetGCPercent it decides and
// changes nothing. Call it once, at start-up, before the sweep allocates.
func (h Host) ApplyGC() GCDecision {
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
		h.SetGCPercent(GCPercent)
	}
	return GCDecision{GOGC: strconv.Itoa(GCPercent), Source: GCFromDefault}
}
