// Package history is the durable record of what the reaper did: which
// outcomes of a sweep count as actions done, what of each the ledger keeps
// (state.Record), and how the record is shown to a person or a script. The
// action line and the Event say the same for a while; the record is what
// is left a week later, without a log stack.
package history

import (
	"time"
	"unicode/utf8"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
)

// Stamp is what a sweep adds to each record of its actions.
type Stamp struct {
	// At is when the actions were over, on the sweep's reference clock.
	At time.Time
	// Version is the release of runner-reaper that acted.
	Version string
	// WebHost is the GitHub web host the run pages are on.
	WebHost string
	// Redact removes the process's secrets from a text before it is kept;
	// nil keeps it as it is. The record outlives the process, and is read
	// by whoever may read the ledger.
	Redact func(string) string
}

// The longest texts a record keeps, in bytes. A pod's annotation, a
// GitHub answer or an EphemeralRunner's message can be as long as its
// writer likes; the ledger has a size limit, and a record is one line of a
// table.
const (
	maxText     = 256
	maxEvidence = 512
)

// Done reports whether an outcome is an action really carried out: a
// write, not a dry run's, that changed something (a registration or an
// object deleted, a finalizer released, a ServiceAccount deleted). A
// would-delete, an audit, a refusal, a write that found its object gone
// already or changed, and a candidate left for later are not; a candidate
// whose later write failed after an earlier one deleted is, with its
// error.
func Done(o reap.Outcome) bool {
	if o.DryRun {
		return false
	}
	for _, r := range []fleet.Result{o.Registration, o.ObjectResult, o.Finalizer, o.ServiceAccount} {
		if r == fleet.Deleted {
			return true
		}
	}
	return false
}

// Records are the records of the actions among outs that were done, in
// the order they were carried out.
func Records(outs []reap.Outcome, s Stamp) []state.Record {
	var h []state.Record
	for _, o := range outs {
		if Done(o) {
			h = append(h, record(o, s))
		}
	}
	return h
}

// record is o as the ledger keeps it. Every text is redacted, escaped
// (package safetext) and bounded here, once, so that what is stored is
// safe to show as it is.
func record(o reap.Outcome, s Stamp) state.Record {
	c := o.Candidate
	text := func(v string, limit int) string { return bound(s.redact(v), limit) }
	r := state.Record{
		At:                   s.At,
		Verdict:              text(string(c.Verdict), maxText),
		Evidence:             text(c.Evidence, maxEvidence),
		Scope:                text(c.ScopeKey, maxText),
		Action:               text(string(o.Action), maxText),
		Result:               text(string(o.Result), maxText),
		RegistrationResult:   text(string(o.Registration), maxText),
		ObjectResult:         text(string(o.ObjectResult), maxText),
		FinalizerResult:      text(string(o.Finalizer), maxText),
		ServiceAccountResult: text(string(o.ServiceAccount), maxText),
		Version:              text(s.Version, maxText),
	}
	if o.Err != nil {
		r.Error = text(o.Err.Error(), maxEvidence)
	}
	kind, ns, name := object(c)
	r.ObjectKind, r.ObjectName = text(kind, maxText), text(name, maxText)
	pod, runnerName, runnerID := "", "", int64(0)
	if c.Pod != nil {
		ns, pod, runnerName = c.Pod.Namespace, c.Pod.Name, c.Pod.RunnerName
	}
	if er := c.EphemeralRunner; er != nil {
		ns, runnerID, runnerName = er.Namespace, er.RunnerID, er.Name
	}
	if c.Registration != nil {
		runnerID, runnerName = c.Registration.ID, c.Registration.Name
	}
	if runnerID == 0 {
		runnerID = c.RunnerID
	}
	r.Namespace, r.Pod, r.RunnerName, r.RunnerID = text(ns, maxText), text(pod, maxText), text(runnerName, maxText), runnerID
	if e := c.Exit; e != nil {
		r.Exit = &state.RecordExit{Code: e.Code, Signal: e.Signal, Reason: text(e.Reason, maxText),
			Class: text(string(e.Class), maxText), FromLastState: e.FromLastState, FinishedAt: e.FinishedAt.UTC()}
	}
	r.Job = job(o, s, text)
	return r
}

// object names the Kubernetes object the action acted on, as reap.Object
// does in one string: kind, namespace and name; none for a registration
// alone.
func object(c reconcile.Candidate) (kind, namespace, name string) {
	switch {
	case c.EphemeralRunner != nil:
		return fleet.EphemeralRunnerKind, c.EphemeralRunner.Namespace, c.EphemeralRunner.Name
	case c.Pod == nil:
		return "", "", ""
	case c.Pod.Owner.ARCOwned():
		return c.Pod.Owner.Kind, c.Pod.Namespace, c.Pod.Owner.Name
	default:
		return "Pod", c.Pod.Namespace, c.Pod.Name
	}
}

// job is the runner's job as the action line names it: what ARC or the
// pool recorded, and what GitHub said of it when the guard asked; nil for
// a runner known to have held no job.
func job(o reap.Outcome, s Stamp, text func(string, int) string) *state.RecordJob {
	j := o.Candidate.Job
	if j == nil {
		return nil
	}
	out := &state.RecordJob{JobID: j.JobID, RequestID: j.RequestID}
	if j.Known() {
		out.Repository, out.RunID = text(j.Repository(), maxText), j.RunID
		out.RunURL = text(j.RunURL(s.WebHost), maxText)
	}
	name := j.Name
	if st := o.Job; st != nil {
		out.Status, out.Conclusion, out.URL = text(st.Status, maxText), text(st.Conclusion, maxText), text(st.HTMLURL, maxText)
		if name == "" {
			name = st.Name
		}
		if out.JobID == 0 {
			out.JobID = st.JobID
		}
	}
	out.Name = text(name, maxText)
	return out
}

func (s Stamp) redact(v string) string {
	if s.Redact == nil {
		return v
	}
	return s.Redact(v)
}

// bound escapes v (package safetext) and cuts it to at most limit bytes,
// at a rune's edge, ending it with "…" when it was cut. An escape cut in
// half is still printable text.
func bound(v string, limit int) string {
	v = safetext.String(v)
	if len(v) <= limit {
		return v
	}
	const more = "…"
	cut := limit - len(more)
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + more
}
