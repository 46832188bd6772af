package history

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/state"
)

// ForRunner keeps the records of actions on the runner named name, as a
// record names it (escaped, so a name with a control character is asked
// for as it was given).
func ForRunner(h []state.Record, name string) []state.Record {
	want := safetext.String(name)
	var out []state.Record
	for _, r := range h {
		if r.RunnerName == want {
			out = append(out, r)
		}
	}
	return out
}

// Newest is h newest first, as a person asks for it: by time, and among
// the records of one time (one sweep's) the last recorded first. h itself
// is left as it is.
func Newest(h []state.Record) []state.Record {
	out := slices.Clone(h)
	slices.Reverse(out)
	slices.SortStableFunc(out, func(a, b state.Record) int { return b.At.Compare(a.At) })
	return out
}

// WriteJSON writes each record as a line of JSON, in the order given, for
// scripts: the ledger's own keys. Every text is escaped again (package
// safetext) before it is encoded: the ledger can be edited by hand, and
// encoding/json writes a bidirectional control or a C1 code raw.
func WriteJSON(w io.Writer, h []state.Record) error {
	enc := json.NewEncoder(w)
	for _, r := range h {
		if err := enc.Encode(escaped(r)); err != nil {
			return fmt.Errorf("write the record as json: %w", err)
		}
	}
	return nil
}

// WriteTable writes the records as an aligned table for a person, in the
// order given: when, the verdict, the object, the runner, its job, what
// each write answered, and the fingerprint (the exit, then the evidence),
// last because it is the longest. Every field is escaped before the table
// is laid out, so that one record is one line and each column holds what
// it says.
func WriteTable(w io.Writer, h []state.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tVERDICT\tOBJECT\tRUNNER\tJOB\tWRITES\tFINGERPRINT")
	for _, r := range h {
		r = escaped(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.At.UTC().Format(time.RFC3339), r.Verdict,
			orDash(objectCell(r)), orDash(runnerCell(r)), orDash(jobCell(r.Job)), orDash(writesCell(r)), orDash(fingerprintCell(r)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the record as a table: %w", err)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// objectCell is the object as the action line names it: KIND NS/NAME,
// with the pod after it where the object is its owner.
func objectCell(r state.Record) string {
	if r.ObjectKind == "" {
		return ""
	}
	s := r.ObjectKind + " " + r.Namespace + "/" + r.ObjectName
	if r.Pod != "" && (r.ObjectKind != "Pod" || r.Pod != r.ObjectName) {
		s += " (pod " + r.Pod + ")"
	}
	return s
}

func runnerCell(r state.Record) string {
	s := r.RunnerName
	if r.RunnerID != 0 {
		s = strings.TrimSpace(fmt.Sprintf("%s (#%d)", s, r.RunnerID))
	}
	return s
}

// jobCell is OWNER/REPO run RUN_ID NAME (status, conclusion), as the audit
// names a job.
func jobCell(j *state.RecordJob) string {
	if j == nil {
		return ""
	}
	var parts []string
	if j.Repository != "" {
		parts = append(parts, j.Repository)
	}
	if j.RunID != 0 {
		parts = append(parts, fmt.Sprintf("run %d", j.RunID))
	}
	if j.JobID != 0 {
		parts = append(parts, fmt.Sprintf("job %d", j.JobID))
	}
	if j.Name != "" {
		parts = append(parts, j.Name)
	}
	s := strings.Join(parts, " ")
	if s == "" {
		s = "recorded, not askable"
	}
	if j.Status != "" {
		s += " (" + j.Status
		if j.Conclusion != "" {
			s += ", " + j.Conclusion
		}
		s += ")"
	}
	return s
}

// writesCell says what each write answered, and how the action ended when
// that was not the deletion every write answered.
func writesCell(r state.Record) string {
	var parts []string
	for _, w := range []struct{ name, result string }{
		{"registration", r.RegistrationResult},
		{"object", r.ObjectResult},
		{"finalizer", r.FinalizerResult},
		{"serviceaccount", r.ServiceAccountResult},
	} {
		if w.result != "" {
			parts = append(parts, w.name+"="+w.result)
		}
	}
	if r.Result != "deleted" {
		parts = append(parts, "result="+r.Result)
	}
	if r.Error != "" {
		parts = append(parts, "error: "+r.Error)
	}
	return strings.Join(parts, " ")
}

// fingerprintCell is the exit, as [class] exit CODE REASON, then the
// evidence.
func fingerprintCell(r state.Record) string {
	var parts []string
	if e := r.Exit; e != nil {
		s := fmt.Sprintf("[%s] exit %d", e.Class, e.Code)
		if e.Signal != 0 {
			s += fmt.Sprintf(" signal %d", e.Signal)
		}
		if e.Reason != "" {
			s += " " + e.Reason
		}
		if e.FromLastState {
			s += " (last state)"
		}
		parts = append(parts, s+";")
	}
	if r.Evidence != "" {
		parts = append(parts, r.Evidence)
	}
	return strings.TrimSuffix(strings.Join(parts, " "), ";")
}

// escaped is r with every text escaped (package safetext).
func escaped(r state.Record) state.Record {
	for _, f := range []*string{&r.Verdict, &r.Evidence, &r.Scope, &r.Action, &r.Result, &r.ObjectKind, &r.Namespace,
		&r.ObjectName, &r.Pod, &r.RunnerName, &r.RegistrationResult, &r.ObjectResult, &r.FinalizerResult,
		&r.ServiceAccountResult, &r.Error, &r.Version} {
		*f = safetext.String(*f)
	}
	if r.Exit != nil {
		e := *r.Exit
		e.Reason, e.Class = safetext.String(e.Reason), safetext.String(e.Class)
		r.Exit = &e
	}
	if r.Job != nil {
		j := *r.Job
		for _, f := range []*string{&j.Repository, &j.RunURL, &j.Name, &j.Status, &j.Conclusion, &j.URL} {
			*f = safetext.String(*f)
		}
		r.Job = &j
	}
	return r
}
