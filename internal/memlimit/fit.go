package memlimit

import (
	"fmt"
	"log/slog"
	"math"
	"math/big"
)

// Fleet is the size of what one sweep held: the runner pods it listed and
// the GitHub registrations it read.
type Fleet struct {
	Pods, Registrations int64
	// Unobserved is true when the sweep ended before it had observed the
	// fleet (the ledger, the pods or the EphemeralRunners could not be
	// read, the deadline came): the counts are not the fleet's size, and
	// no fit can be said from them. A sweep that observed the fleet but
	// skipped or deferred scopes counts the registrations it read.
	Unobserved bool
}

// Formula models a sweep's peak resident memory, in bytes, as
// Base + PerPod*pods + PerRegistration*registrations. One model serves the
// warning, the README's table and the shipped limits, so that they cannot
// disagree.
type Formula struct {
	// Base is the peak of a sweep of nothing: the binary's code, the
	// runtime, the clients.
	Base int64
	// PerPod and PerRegistration are what one more pod, or one more
	// registration, adds to the peak.
	PerPod, PerRegistration int64
}

// Default is the model the reaper ships with, from the peaks `make bench`
// measured (ru_maxrss of the compiled binary's sweeps at the collector's
// pace then, 25, no memory limit; test/scale): warm medians [highest]
// 35.0 [35.7], 44.9 [45.3], 66.9 [67.3], 90.0 [94.1] and 147.2 [148.3]
// MiB at 1,000, 10,000, 30,000, 50,000 and 100,000 ARC runners, each a
// pod, its EphemeralRunner (REAPER_ARC_LEAKS on) and its registration;
// cold sweeps peaked lower. The slope between 30,000 and 100,000 is 1.20
// KB a runner, set at 1.25 KB: 1,050 bytes for the pod and its
// EphemeralRunner, 200 for the registration, in about the proportion of
// what a sweep holds of each. The base is set so that every sweep
// measured fits, the highest at 50,000 included (95.7 MiB, inside a
// 128 MiB limit). Without ARC's objects a pod costs less, so the model is
// on the safe side there. The binary has since shed the OTLP SDK's 7 MiB
// of code, collects at 10 and lets go of its views before the ledger's
// save: 25.4, 31.3, 46.9, 61.9 and 95.5 MiB at 1,000, 10,000, 30,000,
// 50,000 and 100,000 (1,000, 30,000 and 50,000 measured before the views
// were let go of), all well inside the model, which keeps room for a
// fleet in trouble whose sweep keeps its views to the end.
func Default() Formula {
	return Formula{
		Base:            37 << 20,
		PerPod:          1050,
		PerRegistration: 200,
	}
}

// warnPercent is how full the limit may get before the warning: the
// margin left is for the next sweep's growth and for the garbage the
// collector has not yet returned.
const warnPercent = 80

// NeededMiB is the limit that puts the fleet's peak by the formula at 80%
// of it, in whole MiB rounded up: the limit to recommend for a fleet of
// that size.
func (f Formula) NeededMiB(fl Fleet) int64 {
	// ceil(bytes * 100/80 / MiB)
	n := new(big.Int).Mul(f.bytes(fl), big.NewInt(100))
	d := big.NewInt(warnPercent << 20)
	n.Add(n, d).Sub(n, big.NewInt(1))
	n.Quo(n, d)
	return min(clamp(n), math.MaxInt64>>20)
}

// bytes is the formula, exact: a hostile count times a cost does not
// overflow.
func (f Formula) bytes(fl Fleet) *big.Int {
	b := big.NewInt(max(f.Base, 0))
	return b.Add(b, f.perFleet(fl))
}

// perFleet is the part of the formula that grows with the fleet.
func (f Formula) perFleet(fl Fleet) *big.Int {
	p := new(big.Int).Mul(big.NewInt(max(f.PerPod, 0)), big.NewInt(max(fl.Pods, 0)))
	r := new(big.Int).Mul(big.NewInt(max(f.PerRegistration, 0)), big.NewInt(max(fl.Registrations, 0)))
	return p.Add(p, r)
}

// Fit is what a limit means for the fleet observed.
type Fit struct {
	// Pods and Registrations are the largest fleet in the observed
	// proportion whose peak by the formula is at most 80% of the limit:
	// the fleet the limit fits. Both are 0 without a limit, or where even
	// an empty fleet does not fit; math.MaxInt64 where the formula puts no
	// bound (it charges nothing per item).
	Pods, Registrations int64
	// NeededMiB is the limit the observed fleet needs (Formula.NeededMiB).
	NeededMiB int64
}

// Check says whether a peak of peak bytes passed 80% of a limit of limit
// bytes (never without a limit, or without a peak), and what the limit
// means for the fleet by the formula: nothing (a zero Fit) for a fleet not
// observed whole. It holds for any figures, hostile or nonsensical:
// negatives count as 0 and no sum overflows.
func Check(peak, limit int64, fleet Fleet, f Formula) (warn bool, fit Fit) {
	if !fleet.Unobserved {
		fit.NeededMiB = f.NeededMiB(fleet)
	}
	if limit <= 0 {
		return false, fit
	}
	budget := limit/100*warnPercent + limit%100*warnPercent/100 // floor(limit*0.8) without overflow
	// peak and budget are whole bytes: peak > limit*0.8 exactly when
	// peak > floor(limit*0.8).
	warn = peak > 0 && peak > budget
	if fleet.Unobserved {
		return warn, fit
	}

	room := budget - max(f.Base, 0)
	if room < 0 {
		return warn, fit
	}
	// The largest k with Base + k*perFleet <= budget is room/perFleet;
	// the fleet it fits is floor(k*pods), floor(k*registrations).
	per := f.perFleet(fleet)
	fit.Pods = scaled(room, max(fleet.Pods, 0), per)
	fit.Registrations = scaled(room, max(fleet.Registrations, 0), per)
	return warn, fit
}

// scaled is floor(room*count/per), math.MaxInt64 where per is 0 and count
// is not: a formula that charges nothing per item fits any number.
func scaled(room, count int64, per *big.Int) int64 {
	if count == 0 {
		return 0
	}
	if per.Sign() == 0 {
		return math.MaxInt64
	}
	n := new(big.Int).Mul(big.NewInt(room), big.NewInt(count))
	return clamp(n.Quo(n, per))
}

func clamp(n *big.Int) int64 {
	if !n.IsInt64() {
		if n.Sign() < 0 {
			return 0
		}
		return math.MaxInt64
	}
	return max(n.Int64(), 0)
}

// Message is the warning's message; Check says when to log it, WarnAttrs
// what with.
const Message = "memory near its limit"

// WarnAttrs are the warning's attributes, with the keys alerts read, and
// its effect: what happens if nobody acts, and what to act with.
func WarnAttrs(peak int64, lim Limit, fleet Fleet, fit Fit) []slog.Attr {
	if fleet.Unobserved {
		// Counts of a fleet read in part would understate it, and a fit
		// from them would recommend a limit too small.
		return []slog.Attr{
			slog.Int64("peak_rss_bytes", peak),
			slog.Int64("memory_limit_bytes", lim.Bytes),
			slog.String("memory_limit_source", string(lim.Source)),
			slog.Bool("fleet_observed", false),
			slog.String("effect", "the sweep's peak passed 80% of its memory limit before it had observed the whole fleet, "+
				"so the fleet's size is unknown; nearer the limit it will be OOM-killed, with no report: raise the limit "+
				"to the README's for the fleet's size (in a Lambda, the peak may be an earlier invocation's)"),
		}
	}
	return []slog.Attr{
		slog.Int64("peak_rss_bytes", peak),
		slog.Int64("memory_limit_bytes", lim.Bytes),
		slog.String("memory_limit_source", string(lim.Source)),
		slog.Bool("fleet_observed", true),
		slog.Int64("pods", fleet.Pods),
		slog.Int64("registrations", fleet.Registrations),
		slog.Int64("fits_pods", fit.Pods),
		slog.Int64("fits_registrations", fit.Registrations),
		slog.Int64("needed_limit_mib", fit.NeededMiB),
		slog.String("effect", effect(lim, fit)),
	}
}

func effect(lim Limit, fit Fit) string {
	if fit.NeededMiB > lim.Bytes>>20 {
		return fmt.Sprintf("the sweep's peak passed 80%% of its memory limit: at this growth it will be OOM-killed, "+
			"with no report; a limit of %d MiB fits this fleet, this limit fits about %d pods and %d registrations",
			fit.NeededMiB, fit.Pods, fit.Registrations)
	}
	// The formula fits this fleet in the limit: the peak came from
	// elsewhere, or the formula is out of date.
	return fmt.Sprintf("the sweep's peak passed 80%% of its memory limit, though by the formula this fleet needs "+
		"only %d MiB: something besides the fleet's size holds memory (in a Lambda, an earlier invocation: "+
		"the peak is the process's), or the formula is out of date; nearer the limit it will be OOM-killed, with no report",
		fit.NeededMiB)
}
