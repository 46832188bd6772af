package state

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// MaxHistory is the most records a ledger may be asked to keep
// (REAPER_HISTORY_SIZE). A record is under a kilobyte, and a ConfigMap
// holds 900 KB of ledger: past a thousand the records would crowd out the
// list cache every sweep, and then the marks' room.
const MaxHistory = 1000

// Record is one action a sweep really carried out: a write that changed
// something (a registration or an object deleted, a finalizer released).
// It is what an operator reads a week later, when the action line and the
// Event are gone: which runner, holding which job, was acted on, why, and
// what each write answered. Its keys are the action line's, so the two
// read alike. The text in it came from outside (pods, GitHub, servers'
// errors): whoever builds a record bounds and escapes it, and whoever
// shows one escapes it again, since the ledger can be edited by hand.
type Record struct {
	// At is when the sweep's actions were over, on the reference clock
	// (the API server's), like every time the ledger keeps.
	At       time.Time `json:"at"`
	Verdict  string    `json:"verdict"`
	Evidence string    `json:"evidence,omitempty"`
	Scope    string    `json:"scope,omitempty"`
	// Action is the protocol's word for what was done (reap.Action), and
	// Result how the candidate ended (fleet.Result): deleted, or error
	// when a later write failed after an earlier one had changed
	// something.
	Action string `json:"action"`
	Result string `json:"result"`
	// ObjectKind, Namespace and ObjectName name the Kubernetes object
	// acted on (for a pod ARC owns, its owner); none for a registration
	// alone (a ghost). Namespace is the pod's too.
	ObjectKind string `json:"object_kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	ObjectName string `json:"object_name,omitempty"`
	Pod        string `json:"pod,omitempty"`
	RunnerName string `json:"runner_name,omitempty"`
	RunnerID   int64  `json:"runner_id,omitempty"`
	// What each write answered, as fleet.Result words; empty for a write
	// that was not made.
	RegistrationResult   string `json:"registration_result,omitempty"`
	ObjectResult         string `json:"object_result,omitempty"`
	FinalizerResult      string `json:"finalizer_result,omitempty"`
	ServiceAccountResult string `json:"serviceaccount_result,omitempty"`
	// Error is what went wrong with a write after one that changed
	// something, as the action line said it.
	Error string `json:"error,omitempty"`
	// Exit is the runner container's exit fingerprint, for a terminal pod.
	Exit *RecordExit `json:"exit,omitempty"`
	// Job is the job the runner was known to hold or have held.
	Job *RecordJob `json:"job,omitempty"`
	// Version is the runner-reaper release that acted.
	Version string `json:"version,omitempty"`
}

// RecordExit is a terminated runner container's fingerprint
// (reconcile.Exit).
type RecordExit struct {
	Code          int32     `json:"code"`
	Signal        int32     `json:"signal,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	Class         string    `json:"class"`
	FromLastState bool      `json:"from_last_state,omitempty"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
}

// RecordJob is a runner's job: what ARC or the pool recorded of it
// (fleet.Job), and what GitHub said of it when the job guard asked
// (fleet.JobStatus).
type RecordJob struct {
	Repository string `json:"repository,omitempty"`
	RunID      int64  `json:"run_id,omitempty"`
	RunURL     string `json:"run_url,omitempty"`
	JobID      int64  `json:"job_id,omitempty"`
	Name       string `json:"name,omitempty"`
	RequestID  int64  `json:"request_id,omitempty"`
	Status     string `json:"status,omitempty"`
	Conclusion string `json:"conclusion,omitempty"`
	URL        string `json:"url,omitempty"`
}

// KeepLast is h bounded to its n newest records (the last n), nil when n
// is not positive. What it returns has no room past its end, so that an
// append to it never writes into h's array.
func KeepLast(h []Record, n int) []Record {
	if n <= 0 || len(h) == 0 {
		return nil
	}
	return slices.Clip(h[max(len(h)-n, 0):])
}

// DecodeHistory reads what Fit encoded as History ("" is none). A backend's
// Load leaves out a record it cannot read, rather than fail the sweep (the
// record feeds no decision; see TrimLog.DroppedHistory); LoadHistory,
// which a person asked for, says so.
func DecodeHistory(s string) ([]Record, error) {
	if s == "" {
		return nil, nil
	}
	var h []Record
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, fmt.Errorf("the record of actions is not the expected JSON: %w", err)
	}
	return h, nil
}
