// Package memlimit keeps the reaper inside the memory it was given. A sweep's
// memory grows with the fleet (every runner pod and every registration is
// held at once while they are matched), so a limit that fitted last month
// OOM-kills the sweep when the fleet doubles: the kernel's kill leaves no
// report, no metrics and no log line saying why. The package finds the
// process's limit (a Lambda's configured memory, else its cgroup's), sets the
// Go runtime's soft limit below it so the garbage collector works harder
// before the kernel steps in, and after a sweep says, while there is still
// room, when the peak came near the limit and which fleet the limit fits.
package memlimit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"

	automemlimit "github.com/KimMachineGun/automemlimit/memlimit"
)

// Source is where a limit was read from, as it is logged
// (memory_limit_source).
type Source string

const (
	SourceNone   Source = "none"
	SourceCgroup Source = "cgroup"
	SourceLambda Source = "lambda"
)

// LambdaMemoryEnv is the variable Lambda sets to the function's configured
// memory, in MB that are really MiB (128 is 134217728 bytes).
const LambdaMemoryEnv = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

// Limit is the process's memory limit: the memory the kernel or Lambda kills
// it beyond. Bytes is 0 when there is none (Source is then SourceNone).
type Limit struct {
	Bytes  int64
	Source Source
}

// noLimitFrom is the smallest figure taken for "no limit" rather than a
// limit. cgroup v1 writes its "no limit" as the kernel's largest page count
// in bytes (9223372036854771712 with 4 KiB pages, less with 64 KiB ones),
// which automemlimit already reads as ErrNoLimit; a figure this large from
// any other place (another page size, a hostile or broken source) is no
// limit either: no machine has 4 EiB, and taken as one it would overflow
// every sum below.
const noLimitFrom = 1 << 62

// Host is what the package reads from and changes in the process. System
// is the real one; tests build their own. A nil field reads nothing (the
// variable is unset, the cgroup has no limit); without SetMemoryLimit,
// Apply decides and changes nothing, and reads the runtime's soft limit as
// none.
type Host struct {
	// LookupEnv is os.LookupEnv.
	LookupEnv func(key string) (string, bool)
	// Cgroup is automemlimit's FromCgroup: the limit of the cgroup the
	// process is in, for cgroup v1, v2 and hybrid hosts, the smallest on
	// v2's way up to the root.
	Cgroup func() (uint64, error)
	// SetMemoryLimit is debug.SetMemoryLimit: it sets the runtime's soft
	// limit and returns the previous one; a negative figure only reads it.
	SetMemoryLimit func(limit int64) int64
	// SetGCPercent is debug.SetGCPercent: it sets the collector's pace
	// and returns the previous one.
	SetGCPercent func(percent int) int
}

// System is the process's own host.
func System() Host {
	return Host{LookupEnv: os.LookupEnv, Cgroup: automemlimit.FromCgroup, SetMemoryLimit: debug.SetMemoryLimit, SetGCPercent: debug.SetGCPercent}
}

// Limit reads the process's memory limit: a Lambda's configured memory
// where AWS_LAMBDA_FUNCTION_MEMORY_SIZE is set (the figure Lambda enforces,
// whatever the sandbox's cgroup says), else its cgroup's. An error comes
// with Limit{Source: SourceNone}, usable as is: the caller decides whether a
// process that cannot know its limit runs without one.
func (h Host) Limit() (Limit, error) {
	if v, ok := h.lookupEnv(LambdaMemoryEnv); ok && v != "" {
		mib, err := parseLambdaMiB(v)
		if err != nil {
			return Limit{Source: SourceNone}, badLambda{err}
		}
		return Limit{Bytes: mib << 20, Source: SourceLambda}, nil
	}
	if h.Cgroup == nil {
		return Limit{Source: SourceNone}, nil
	}
	b, err := h.Cgroup()
	switch {
	case errors.Is(err, automemlimit.ErrNoLimit),
		errors.Is(err, automemlimit.ErrNoCgroup),
		errors.Is(err, automemlimit.ErrCgroupsNotSupported):
		return Limit{Source: SourceNone}, nil
	case err != nil:
		return Limit{Source: SourceNone}, fmt.Errorf("read the cgroup's memory limit: %w", err)
	case b == 0 || b >= noLimitFrom:
		// 0 is no limit a process could run under: a broken source.
		return Limit{Source: SourceNone}, nil
	}
	return Limit{Bytes: int64(b), Source: SourceCgroup}, nil
}

// ErrLambdaMemory marks Limit's error for an AWS_LAMBDA_FUNCTION_MEMORY_SIZE
// that Lambda did not write: a setting to refuse at start-up, unlike a
// cgroup that could not be read, which leaves the process without a known
// limit but no less able to sweep.
var ErrLambdaMemory = errors.New("malformed " + LambdaMemoryEnv)

// badLambda marks an error as ErrLambdaMemory without changing its text.
type badLambda struct{ err error }

func (b badLambda) Error() string   { return b.err.Error() }
func (b badLambda) Unwrap() []error { return []error{ErrLambdaMemory, b.err} }

func (h Host) lookupEnv(key string) (string, bool) {
	if h.LookupEnv == nil {
		return "", false
	}
	return h.LookupEnv(key)
}

// maxLambdaMiB is the largest figure whose bytes fit an int64.
const maxLambdaMiB = math.MaxInt64 >> 20

// parseLambdaMiB reads Lambda's memory size: a whole number of MiB above
// zero, as Lambda writes it. Anything else was not written by Lambda, and a
// guess would set the soft limit from it.
func parseLambdaMiB(v string) (int64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	switch {
	case err == nil && n == 0:
		return 0, fmt.Errorf("%s=%s: a function's memory is above 0 MB (example: %s=512)", LambdaMemoryEnv, quote(v), LambdaMemoryEnv)
	case errors.Is(err, strconv.ErrRange) || (err == nil && n > maxLambdaMiB):
		return 0, fmt.Errorf("%s=%s: more memory than a 64-bit process can address (example: %s=512)", LambdaMemoryEnv, quote(v), LambdaMemoryEnv)
	case err != nil:
		return 0, fmt.Errorf("%s=%s: not the function's memory in MB as Lambda sets it, a whole number (example: %s=512)", LambdaMemoryEnv, quote(v), LambdaMemoryEnv)
	}
	return int64(n), nil
}

// quote shows a value from outside quoted and escaped, and cut short: it is
// named in an error, not stored.
func quote(v string) string {
	const most = 32
	if len(v) > most {
		return strconv.Quote(v[:most]) + "..."
	}
	return strconv.Quote(v)
}
