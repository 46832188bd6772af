package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Row is one line of the audit: a verdict, and what a sweep would do about
// it and when.
type Row struct {
	Verdict    string  `json:"verdict"`
	Namespace  string  `json:"namespace,omitempty"`
	Pod        string  `json:"pod,omitempty"`
	RunnerName string  `json:"runner_name,omitempty"`
	RunnerID   int64   `json:"runner_id,omitempty"`
	Scope      string  `json:"scope"`
	AgeSeconds float64 `json:"age_seconds"`
	Evidence   string  `json:"evidence"`
	ExitClass  string  `json:"exit_class,omitempty"`
	// WaitReason is what held a never-started runner back (its message
	// is in the evidence).
	WaitReason string `json:"wait_reason,omitempty"`
	// Job names the job the runner is known to have held, and what GitHub
	// said of it when the guard asked.
	Job       string    `json:"job,omitempty"`
	Would     string    `json:"would"`
	MaturesAt time.Time `json:"matures_at,omitzero"`
	// Group is what made the pod (fleet.Group), and Loop, when that
	// group is in a reap loop, its fingerprint and what to fix.
	Group string `json:"group,omitempty"`
	Loop  string `json:"loop,omitempty"`
}

// Rows lists what the sweep found: actionable candidates in act order, then
// those waiting for their marks to mature, soonest first. Every text field
// is escaped (see Row.escape), for the table and the JSON alike.
func Rows(res sweep.Result) []Row {
	rows := make([]Row, 0, len(res.Outcomes)+len(res.Pending))
	looping := map[string]string{}
	for _, l := range res.Loops {
		looping[l.Group.String()] = l.Fingerprint + ": " + l.Fix
	}
	for _, o := range res.Outcomes {
		r := row(res.Started, o.Candidate)
		if st := o.Job; st != nil && r.Job != "" {
			r.Job += " (" + st.Status
			if st.Conclusion != "" {
				r.Job += ", " + st.Conclusion
			}
			r.Job += ")"
		}
		if l := o.RunnerLog; l != nil && r.Job == "" && l.Err == nil && l.Word.Job != "" {
			// The runner's own word, where nothing else names a job.
			r.Job = l.Word.Kind.String() + " " + l.Word.Job + " (runner's log)"
		}
		switch o.Result {
		case fleet.WouldDelete:
			r.Would = "now: " + strings.ReplaceAll(string(o.Action), "-", " ")
		case fleet.Deferred:
			r.Would = "deferred: over this sweep's bound"
		case fleet.LoopHeld:
			r.Would = "loop-held: its group is in a reap loop, one action a sweep"
		case fleet.RateLimited:
			r.Would = "rate-limited: no GitHub call this sweep"
			if rl := fleet.AsRateLimit(o.Err); rl != nil {
				r.Would += " (until " + rl.Until.UTC().Format(time.RFC3339) + ")"
			}
		default:
			r.Would = string(o.Result)
		}
		rows = append(rows, r)
	}
	pending := append([]reconcile.Candidate(nil), res.Pending...)
	reconcile.Order(pending)
	for _, c := range pending {
		r := row(res.Started, c)
		r.MaturesAt = c.MatureAt
		if c.Mark.FirstSeen.Equal(res.Started) {
			r.Would = "mark: first seen now, confirm on a later sweep"
		} else {
			r.Would = "wait: mark not yet confirmed"
		}
		rows = append(rows, r)
	}
	for i := range rows {
		rows[i].Loop = looping[rows[i].Group]
		rows[i].escape()
	}
	return rows
}

// escape makes every field of r safe to show (package safetext): they
// quote pods, runner names and GitHub's and Kubernetes' words, and a
// newline, a tab or an escape sequence in one of them would forge a row,
// break the columns or act on the operator's terminal. It runs on the
// fields, before the table or the JSON adds any structure.
func (r *Row) escape() {
	for _, f := range []*string{&r.Verdict, &r.Namespace, &r.Pod, &r.RunnerName, &r.Scope, &r.Evidence, &r.ExitClass, &r.WaitReason, &r.Job, &r.Would, &r.Group, &r.Loop} {
		*f = safetext.String(*f)
	}
}

func row(now time.Time, c reconcile.Candidate) Row {
	r := Row{Verdict: string(c.Verdict), Scope: c.ScopeKey, Evidence: c.Evidence}
	if c.Pod != nil {
		r.Namespace, r.Pod, r.RunnerName = c.Pod.Namespace, c.Pod.Name, c.Pod.RunnerName
		r.Group = c.Pod.Group.String()
		r.AgeSeconds = age(now, c.Pod.CreatedAt.Time())
	} else if !c.Mark.FirstSeen.IsZero() {
		r.AgeSeconds = age(now, c.Mark.FirstSeen)
	}
	if c.Registration != nil {
		r.RunnerID, r.RunnerName = c.Registration.ID, c.Registration.Name
	}
	if c.Exit != nil {
		r.ExitClass = string(c.Exit.Class)
	}
	if w := startWait(c); w != nil {
		r.WaitReason = reconcile.WaitReason(w)
	}
	switch j := c.Job; {
	case j == nil:
	case j.Known():
		r.Job = fmt.Sprintf("%s run %d", j.Repository(), j.RunID)
		if j.Name != "" {
			r.Job += " " + j.Name
		}
	default:
		r.Job = "recorded, not askable"
	}
	return r
}

// WriteTable prints the audit for a person. Every field, and every reason
// quoted below the table, is escaped (package safetext) before the table is
// laid out, so that one row is one line and each column holds what it
// says.
func WriteTable(w io.Writer, res sweep.Result) error {
	if !res.Looked {
		_, err := fmt.Fprintf(w, "audit could not look, so it shows nothing: %s\n", safetext.String(blindWhy(res)))
		if err != nil {
			return fmt.Errorf("write audit table: %w", err)
		}
		return nil
	}
	rows := Rows(res)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERDICT\tPOD\tRUNNER\tSCOPE\tAGE\tJOB\tWOULD\tMATURES\tEVIDENCE")
	for _, r := range rows {
		pod, runner, matures, job := "-", "-", "-", "-"
		if r.Job != "" {
			job = r.Job
		}
		if r.Pod != "" {
			pod = r.Namespace + "/" + r.Pod
		}
		if r.RunnerName != "" {
			runner = r.RunnerName
			if r.RunnerID != 0 {
				runner += fmt.Sprintf(" (#%d)", r.RunnerID)
			}
		}
		if !r.MaturesAt.IsZero() {
			matures = r.MaturesAt.UTC().Format(time.TimeOnly) + " (in " + r.MaturesAt.Sub(res.Started).Round(time.Second).String() + ")"
		}
		evidence := r.Evidence
		if r.ExitClass != "" {
			evidence = "[" + r.ExitClass + "] " + evidence
		}
		if r.WaitReason != "" {
			evidence = "[" + r.WaitReason + "] " + evidence
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Verdict, pod, runner, r.Scope,
			(time.Duration(r.AgeSeconds) * time.Second).String(), job, r.Would, matures, evidence)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write audit table: %w", err)
	}
	for _, l := range res.Loops {
		// The group's name is the cluster's, and the fingerprint a
		// kubelet's word: both escaped.
		if _, err := fmt.Fprintf(w, "reap loop: %s reaped %d times for %s, from %s to %s: %s\n",
			safetext.String(l.Group.String()), l.Count, safetext.String(l.Fingerprint),
			l.First.UTC().Format(time.RFC3339), l.Last.UTC().Format(time.RFC3339), l.Fix); err != nil {
			return fmt.Errorf("write audit table: %w", err)
		}
	}
	for _, s := range res.Class.Skipped {
		kind := ""
		if s.Kind != "" {
			kind = " (" + safetext.String(string(s.Kind))
			if !s.Until.IsZero() {
				kind += " until " + s.Until.UTC().Format(time.RFC3339)
			}
			kind += ")"
		}
		if _, err := fmt.Fprintf(w, "scope %s skipped%s: %s\n", safetext.String(s.ScopeKey), kind, safetext.String(s.Reason)); err != nil {
			return fmt.Errorf("write audit table: %w", err)
		}
	}
	for _, key := range res.Moved {
		if _, err := fmt.Fprintf(w, "scope %s judged: its runner list moved while it was read; what it listed counts, and an absence is acted on only once a look-up by name finds no such runner\n", safetext.String(key)); err != nil {
			return fmt.Errorf("write audit table: %w", err)
		}
	}
	for _, u := range res.Class.Unobserved {
		if _, err := fmt.Fprintf(w, "namespace %s not observed, no ghost verdicts: %s\n", safetext.String(u.Namespace), safetext.String(u.Reason)); err != nil {
			return fmt.Errorf("write audit table: %w", err)
		}
	}
	_, err := fmt.Fprintf(w, "%d pod(s), %d finding(s), %d ready, %d waiting for confirmation\n",
		res.Observed.Pods, len(rows), len(res.Outcomes), len(res.Pending))
	if err != nil {
		return fmt.Errorf("write audit table: %w", err)
	}
	return nil
}

// blindWhy says why a sweep could not look.
func blindWhy(res sweep.Result) string {
	if res.Err != nil {
		return res.Err.Error()
	}
	return "the sweep ended before it had observed the fleet"
}

// WriteJSON prints the audit rows for machines; for an audit that could not
// look, an error object instead, never an empty list that would read as a
// clean fleet.
func WriteJSON(w io.Writer, res sweep.Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	var v any = Rows(res)
	if !res.Looked {
		v = map[string]string{"error": "audit could not look, so it shows nothing: " + blindWhy(res)}
	}
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write audit json: %w", err)
	}
	return nil
}
