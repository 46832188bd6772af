package memlimit

import (
	"log/slog"
	"math"
)

// CodeRoom is the memory the runtime's soft limit does not count but the
// limit does: the binary's own code and read-only data, resident and
// charged to the cgroup, yet no part of the Go heap. Measured on the
// stripped linux/amd64 CLI (37.7 MB, functions/cli built as the
// Containerfile does): 22.3 MiB of the binary resident (RssFile) once it
// had started and sent its first request; a whole sweep runs more of it
// (the GitHub client, the reconciliation, the metrics pushes), which the
// rest of the 28 MiB is for. Pass a figure measured over a whole sweep
// (make bench) where there is one.
const CodeRoom = 28 << 20

// GOMEMLIMIT is the variable through which an operator sets the runtime's
// soft limit themselves; the runtime reads it at start-up.
const GOMEMLIMIT = "GOMEMLIMIT"

// Where the runtime's soft limit in force came from, as logged
// (gomemlimit_source).
const (
	// GoMemLimitFromEnv: the operator set GOMEMLIMIT, and it stands.
	GoMemLimitFromEnv = "env"
	// GoMemLimitFromLimit: set here, below the process's limit.
	GoMemLimitFromLimit = "limit"
	// GoMemLimitNone: no limit known and none set; the runtime's stands.
	GoMemLimitNone = "none"
)

// SoftLimit is the runtime's soft limit for a process limited to limit
// bytes, codeRoom of which the runtime does not see: 90% of the limit, and
// less where the code's room is more than the other 10% (below about 280
// MiB with CodeRoom), so that a heap at its soft limit still leaves the
// code, the goroutine stacks' growth and the runtime's own overhead their
// room. It is never below half the limit: in a limit so small that the
// code takes most of it, the collector still needs a heap to work in, and
// running it without end would only trade the kill for a stall. It is 0
// for no limit.
func SoftLimit(limit, codeRoom int64) int64 {
	if limit <= 0 {
		return 0
	}
	codeRoom = max(codeRoom, 0)
	ninety := limit/10*9 + limit%10*9/10 // limit*0.9 without overflow
	return max(min(ninety, limit-codeRoom), limit/2)
}

// Decision is what Apply decided, to be logged once at start-up (Attrs).
type Decision struct {
	Limit Limit
	// GoMemLimit is the runtime's soft limit in force afterwards, in bytes
	// (math.MaxInt64 is the runtime's "none").
	GoMemLimit int64
	// GoMemLimitSource is where GoMemLimit came from: GoMemLimitFromEnv,
	// GoMemLimitFromLimit or GoMemLimitNone.
	GoMemLimitSource string
}

// Attrs are the start-up line's attributes, with the keys dashboards and
// alerts read.
func (d Decision) Attrs() []slog.Attr {
	return []slog.Attr{
		slog.Int64("memory_limit_bytes", d.Limit.Bytes),
		slog.String("memory_limit_source", string(d.Limit.Source)),
		slog.Int64("gomemlimit_bytes", d.GoMemLimit),
		slog.String("gomemlimit_source", d.GoMemLimitSource),
	}
}

// Apply sets the runtime's soft limit below lim (SoftLimit). A GOMEMLIMIT
// in the environment stands: the operator chose it, knowing something this
// arithmetic does not; Apply then only reads what the runtime made of it.
// Call it once, at start-up: in a Lambda, at the cold start and not for
// every invocation.
func (h Host) Apply(lim Limit, codeRoom int64) Decision {
	d := Decision{Limit: lim, GoMemLimitSource: GoMemLimitNone}
	if v, ok := h.lookupEnv(GOMEMLIMIT); ok && v != "" {
		// The runtime refuses to start with a GOMEMLIMIT it cannot
		// read, so one that is set was read; an empty one it ignores.
		d.GoMemLimitSource = GoMemLimitFromEnv
		d.GoMemLimit = h.currentSoftLimit()
		return d
	}
	soft := SoftLimit(lim.Bytes, codeRoom)
	if soft <= 0 {
		d.GoMemLimit = h.currentSoftLimit()
		return d
	}
	if h.SetMemoryLimit != nil {
		h.SetMemoryLimit(soft)
	}
	d.GoMemLimit, d.GoMemLimitSource = soft, GoMemLimitFromLimit
	return d
}

// Setup reads the limit and applies it. Its error is Limit's, and comes
// with the Decision of running without a limit: the caller reports it and
// decides whether the process goes on.
func (h Host) Setup(codeRoom int64) (Decision, error) {
	lim, err := h.Limit()
	return h.Apply(lim, codeRoom), err
}

func (h Host) currentSoftLimit() int64 {
	if h.SetMemoryLimit == nil {
		return math.MaxInt64
	}
	return h.SetMemoryLimit(-1)
}
