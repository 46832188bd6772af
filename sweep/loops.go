package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/reap"
)

// LoopEventReason is the reason of a reap loop's Event.
const LoopEventReason = "RunnerReapLoop"

// maxLoopEvents bounds the loop Events one sweep records: each is a
// request, and a fleet of many broken templates is said by the warning
// and the metric already.
const maxLoopEvents = 10

// actsOf are the window's entries for the actions the sweep really did:
// an object deleted (a pod, or the ARC runner that owns it), not a dry
// run's would-delete nor anything held or refused.
func actsOf(outs []reap.Outcome, now time.Time) []loops.Act {
	var acts []loops.Act
	for _, o := range outs {
		if o.Result != fleet.Deleted {
			continue
		}
		if a, ok := loops.ActOf(o.Candidate, now); ok {
			acts = append(acts, a)
		}
	}
	return acts
}

// warnLoops warns of each reap loop that stands, on every sweep it
// stands.
func (s *Sweeper) warnLoops(ctx context.Context, ls []loops.Loop) {
	for _, l := range ls {
		s.Log.LogAttrs(ctx, slog.LevelWarn, "reap loop",
			slog.String("group", l.Group.String()),
			slog.Int("count", l.Count),
			slog.Float64("window_seconds", s.Loops.Window.Seconds()),
			slog.String("fingerprint", l.Fingerprint),
			slog.String("verdict", l.Verdict),
			slog.Time("first", l.First),
			slog.Time("last", l.Last),
			slog.String("fix", l.Fix),
			slog.String("effect", "the group's runners keep failing the same way: a broken template, which deleting them does not fix; its terminal pods still go, and of its never-started, unregistered and zombie runners one a sweep"))
	}
}

// loopEventsBudget is the time all of one sweep's loop Events share: each
// is a request, and an API server that does not answer one in that time
// would not answer the rest either.
const loopEventsBudget = reap.DefaultEventTimeout

// newLoops are the loops of after that were not loops before this
// sweep's actions, or whose count grew by them: the loops worth an Event.
// A loop that stands unchanged was said already, and an Event a sweep
// would only repeat it.
func newLoops(before, after []loops.Loop) []loops.Loop {
	was := map[string]int{}
	for _, l := range before {
		was[l.Group.String()+" "+l.Fingerprint] = l.Count
	}
	var out []loops.Loop
	for _, l := range after {
		if n, ok := was[l.Group.String()+" "+l.Fingerprint]; !ok || l.Count > n {
			out = append(out, l)
		}
	}
	return out
}

// recordLoopEvents records an Event on what makes each loop's pods
// (loops.Target), where the operator looks and where the fix goes: for a
// loop that this sweep's actions made or grew (newLoops), at most
// maxLoopEvents a sweep. It runs after the save after acting, which must
// not wait on an optional Event, and all of its Events share one budget
// (loopEventsBudget) that stops short of the time the report needs before
// the deadline. One that fails is a warning.
func (s *Sweeper) recordLoopEvents(ctx context.Context, ls []loops.Loop, outs []reap.Outcome) {
	if s.Events == nil || len(ls) == 0 {
		return
	}
	end := time.Now().Add(loopEventsBudget)
	if d, ok := ctx.Deadline(); ok && d.Add(-reap.ReportReserve).Before(end) {
		end = d.Add(-reap.ReportReserve)
	}
	ectx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	for i, l := range ls {
		if i == maxLoopEvents {
			break
		}
		err := ectx.Err()
		if err == nil {
			ns, target, ok := loops.Target(l.Group, lastPod(outs, l.Group))
			if !ok {
				continue
			}
			msg := fmt.Sprintf("runner-reaper: reap loop: %d runners of %s reaped within %s, each %s: %s",
				l.Count, l.Group, s.Loops.Window, l.Fingerprint, l.Fix)
			err = s.Events.RecordObjectEvent(ectx, ns, target, LoopEventReason, msg)
		} else {
			err = errors.New("no time left in the loop Events' budget")
		}
		if err != nil {
			s.Log.LogAttrs(ctx, slog.LevelWarn, "reap loop event not recorded",
				slog.String("group", l.Group.String()), slog.String("error", err.Error()))
		}
	}
}

// lastPod is the pod of the group acted on last in this sweep, for a loop
// whose Event has no other object to go on.
func lastPod(outs []reap.Outcome, g fleet.Group) *fleet.Pod {
	var last *fleet.Pod
	for _, o := range outs {
		if p := o.Candidate.Pod; o.Result == fleet.Deleted && p != nil && p.Group == g {
			last = p
		}
	}
	return last
}
