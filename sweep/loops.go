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

// reportLoops warns of each reap loop that stands, and, for a sweep that
// acted on a looping group in this sweep, records an Event on what makes
// the group's pods (loops.Target): that is where the operator looks, and
// where the fix goes. The Events are optional, as every Event is: each
// under the Event's own budget, none into the time the report needs, at
// most maxLoopEvents a sweep; one that fails is a warning.
func (s *Sweeper) reportLoops(ctx context.Context, ls []loops.Loop, acts []loops.Act, outs []reap.Outcome, act bool) {
	acted := map[fleet.Group]bool{}
	for _, a := range acts {
		acted[a.Group] = true
	}
	events := 0
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
		if !act || s.Events == nil || !acted[l.Group] || events >= maxLoopEvents {
			continue
		}
		events++
		ns, target, ok := loops.Target(l.Group, lastPod(outs, l.Group))
		if !ok {
			continue
		}
		msg := fmt.Sprintf("runner-reaper: reap loop: %d runners of %s reaped within %s, each %s: %s",
			l.Count, l.Group, s.Loops.Window, l.Fingerprint, l.Fix)
		if err := s.loopEvent(ctx, ns, target, msg); err != nil {
			s.Log.LogAttrs(ctx, slog.LevelWarn, "reap loop event not recorded",
				slog.String("group", l.Group.String()), slog.String("error", err.Error()))
		}
	}
}

// loopEvent records one loop's Event under its own budget (the Event's,
// reap.DefaultEventTimeout), detached from a signal and never into the
// time the report needs before the deadline.
func (s *Sweeper) loopEvent(ctx context.Context, ns string, target fleet.Owner, msg string) error {
	end := time.Now().Add(reap.DefaultEventTimeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-reap.ReportReserve).Before(end) {
		end = d.Add(-reap.ReportReserve)
	}
	if time.Until(end) <= 0 {
		return errors.New("the sweep's deadline has passed")
	}
	ectx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	return s.Events.RecordObjectEvent(ectx, ns, target, LoopEventReason, msg)
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
