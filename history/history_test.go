package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
)

var at = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

func bare() *fleet.Pod {
	return &fleet.Pod{Namespace: "runners", Name: "acme-1", RunnerName: "acme-1"}
}

func arcPod() *fleet.Pod {
	p := bare()
	p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "acme-set-abc"}
	return p
}

func candidate(pod *fleet.Pod, reg *fleet.Registration, er *fleet.EphemeralRunner) reconcile.Candidate {
	return reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Zombie, Evidence: "pod running; registration offline",
		ScopeKey: "org:acme", Pod: pod, Registration: reg, EphemeralRunner: er}}
}

// TestDoneIsAWriteThatChangedSomething: only an outcome one of whose
// writes deleted or released something, outside a dry run, is an action
// done; what reap answers for a dry run, a refusal, an object already
// gone or changed, a busy runner and a candidate left for later is not.
func TestDoneIsAWriteThatChangedSomething(t *testing.T) {
	for _, c := range []struct {
		name string
		out  reap.Outcome
		done bool
	}{
		{"registration then pod deleted", reap.Outcome{Result: fleet.Deleted, Registration: fleet.Deleted, ObjectResult: fleet.Deleted}, true},
		{"a terminal pod deleted, its registration gone already", reap.Outcome{Result: fleet.Deleted, Registration: fleet.AlreadyGone, ObjectResult: fleet.Deleted}, true},
		{"a ghost's registration deleted", reap.Outcome{Result: fleet.Deleted, Registration: fleet.Deleted}, true},
		{"a stuck EphemeralRunner's finalizer released", reap.Outcome{Action: reap.ReleaseRegistration, Result: fleet.Deleted, ObjectResult: fleet.Deleted}, true},
		{"the registration deleted, then the pod's delete failed", reap.Outcome{Result: fleet.Failed, Registration: fleet.Deleted, Err: errors.New("delete pod: forbidden")}, true},
		{"the EphemeralRunner deleted, then its release failed", reap.Outcome{Result: fleet.Failed, ObjectResult: fleet.Deleted, Finalizer: ""}, true},
		{"a dry run's would-delete", reap.Outcome{Result: fleet.WouldDelete, DryRun: true}, false},
		{"a dry run, whatever its fields say", reap.Outcome{Result: fleet.Deleted, Registration: fleet.Deleted, DryRun: true}, false},
		{"a pre-flight refused", reap.Outcome{Result: fleet.Failed, Err: errors.New("pre-flight: forbidden")}, false},
		{"the object gone already", reap.Outcome{Result: fleet.AlreadyGone, ObjectResult: fleet.AlreadyGone}, false},
		{"a ghost gone already", reap.Outcome{Result: fleet.AlreadyGone, Registration: fleet.AlreadyGone}, false},
		{"the object changed", reap.Outcome{Result: fleet.SkippedChanged, ObjectResult: fleet.Changed}, false},
		{"the runner busy", reap.Outcome{Result: fleet.SparedBusy, Registration: fleet.Busy}, false},
		{"deferred by the bound", reap.Outcome{Result: fleet.Deferred, Bounded: true}, false},
		{"not reached", reap.Outcome{Result: fleet.NotReached}, false},
		{"reported", reap.Outcome{Result: fleet.Reported}, false},
		{"a registration delete that failed", reap.Outcome{Result: fleet.Failed, Registration: "", Err: errors.New("502")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.done, Done(c.out))
			h := Records([]reap.Outcome{c.out}, Stamp{At: at})
			if c.done {
				assert.Len(t, h, 1)
			} else {
				assert.Empty(t, h)
			}
		})
	}
}

// TestRecordsSayWhatTheActionLineSays: a zombie's ARC runner reaped with
// its registration, holding a job GitHub said was over, and a terminal
// pod with its exit: every field the action line has, in the ledger's
// shape, stamped with the sweep's clock and the release.
func TestRecordsSayWhatTheActionLineSays(t *testing.T) {
	er := &fleet.EphemeralRunner{Namespace: "arc", Name: "acme-set-xyz", RunnerID: 41}
	zombie := candidate(nil, &fleet.Registration{ID: 41, Name: "acme-set-xyz"}, er)
	zombie.Job = &fleet.Job{Owner: "acme", Repo: "api", RunID: 103, Name: "test (linux)", RequestID: 9103}
	dead := candidate(bare(), nil, nil)
	dead.Verdict, dead.Evidence, dead.RunnerID = fleet.Terminal, "pod Failed", 77
	finished := at.Add(-time.Minute)
	dead.Exit = &reconcile.Exit{Code: 137, Reason: "OOMKilled", Class: reconcile.ExitOOMHost, FinishedAt: finished}
	skipped := candidate(bare(), nil, nil)
	outs := []reap.Outcome{
		{Candidate: zombie, Action: reap.DeleteRegistrationThenEphemeralRunner, Result: fleet.Deleted,
			Registration: fleet.Deleted, ObjectResult: fleet.Deleted, Finalizer: fleet.Deleted,
			Job: &fleet.JobStatus{Status: "completed", Conclusion: "failure", JobID: 555, HTMLURL: "https://ghes.example.com/acme/api/actions/runs/103/job/555"}},
		{Candidate: skipped, Result: fleet.SkippedChanged, ObjectResult: fleet.Changed},
		{Candidate: dead, Action: reap.DeletePod, Result: fleet.Deleted, ObjectResult: fleet.Deleted, ServiceAccount: fleet.AlreadyGone},
	}
	h := Records(outs, Stamp{At: at, Version: "v1.2.3", WebHost: "ghes.example.com"})
	require.Len(t, h, 2, "the skipped candidate changed nothing")
	assert.Equal(t, state.Record{
		At: at, Verdict: "zombie", Evidence: "pod running; registration offline", Scope: "org:acme",
		Action: "delete-registration-then-ephemeralrunner", Result: "deleted",
		ObjectKind: "EphemeralRunner", Namespace: "arc", ObjectName: "acme-set-xyz",
		RunnerName: "acme-set-xyz", RunnerID: 41,
		RegistrationResult: "deleted", ObjectResult: "deleted", FinalizerResult: "deleted",
		Job: &state.RecordJob{Repository: "acme/api", RunID: 103, RunURL: "https://ghes.example.com/acme/api/actions/runs/103",
			JobID: 555, Name: "test (linux)", RequestID: 9103, Status: "completed", Conclusion: "failure",
			URL: "https://ghes.example.com/acme/api/actions/runs/103/job/555"},
		Version: "v1.2.3",
	}, h[0])
	assert.Equal(t, state.Record{
		At: at, Verdict: "terminal", Evidence: "pod Failed", Scope: "org:acme", Action: "delete-pod", Result: "deleted",
		ObjectKind: "Pod", Namespace: "runners", ObjectName: "acme-1", Pod: "acme-1", RunnerName: "acme-1", RunnerID: 77,
		ObjectResult: "deleted", ServiceAccountResult: "already-gone",
		Exit:    &state.RecordExit{Code: 137, Reason: "OOMKilled", Class: "oom-host", FinishedAt: finished},
		Version: "v1.2.3",
	}, h[1])
}

// TestObjectIsReapsObject: the record names the object as reap names it
// in the action line, for every shape of candidate.
func TestObjectIsReapsObject(t *testing.T) {
	legacy := bare()
	legacy.Owner = &fleet.Owner{APIVersion: fleet.LegacyRunnerAPIVersion, Kind: fleet.LegacyRunnerKind, Name: "acme-rd-1"}
	foreign := bare()
	foreign.Owner = &fleet.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs"}
	for name, c := range map[string]reconcile.Candidate{
		"a bare pod":                   candidate(bare(), nil, nil),
		"a pod ARC owns":               candidate(arcPod(), nil, nil),
		"a legacy ARC pod":             candidate(legacy, nil, nil),
		"a pod another controller own": candidate(foreign, nil, nil),
		"an EphemeralRunner":           candidate(nil, nil, &fleet.EphemeralRunner{Namespace: "arc", Name: "er-1"}),
		"an EphemeralRunner and pod":   candidate(arcPod(), nil, &fleet.EphemeralRunner{Namespace: "arc", Name: "acme-set-abc"}),
		"a ghost":                      candidate(nil, &fleet.Registration{ID: 1, Name: "g"}, nil),
	} {
		t.Run(name, func(t *testing.T) {
			kind, ns, obj := object(c)
			if kind == "" {
				assert.Empty(t, reap.Object(c))
				return
			}
			assert.Equal(t, reap.Object(c), kind+" "+ns+"/"+obj)
		})
	}
}

// TestRecordBoundsHostileText: a runner name, an evidence and an error
// from outside are kept redacted, escaped and no longer than their bound,
// cut at a rune's edge; what is kept holds nothing safetext would escape.
func TestRecordBoundsHostileText(t *testing.T) {
	pod := bare()
	pod.RunnerName = "acme-1\n\x1b[2J\u202eevil" + strings.Repeat("é", 400)
	c := candidate(pod, nil, nil)
	c.Evidence = "token ghp_secret_value leaked " + strings.Repeat("\u009b31m", 500)
	out := reap.Outcome{Candidate: c, Action: reap.DeletePod, Result: fleet.Failed, Registration: fleet.Deleted,
		Err: errors.New("delete pod: the server said ghp_secret_value\n" + strings.Repeat("x", 5000))}
	h := Records([]reap.Outcome{out}, Stamp{At: at, Redact: func(s string) string {
		return strings.ReplaceAll(s, "ghp_secret_value", "[REDACTED]")
	}})
	require.Len(t, h, 1)
	r := h[0]
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "ghp_secret_value")
	for field, v := range map[string]string{"runner": r.RunnerName, "evidence": r.Evidence, "error": r.Error} {
		assert.True(t, safetext.Safe(v), "%s is safe: %q", field, v)
		assert.True(t, utf8.ValidString(v), "%s is cut at a rune's edge", field)
		assert.True(t, strings.HasSuffix(v, "…"), "%s says it was cut", field)
	}
	assert.LessOrEqual(t, len(r.RunnerName), maxText)
	assert.LessOrEqual(t, len(r.Evidence), maxEvidence)
	assert.LessOrEqual(t, len(r.Error), maxEvidence)
	assert.True(t, strings.HasPrefix(r.RunnerName, `acme-1\n\x1b[2J\u202eevil`), r.RunnerName)
	assert.True(t, strings.HasPrefix(r.Error, `delete pod: the server said [REDACTED]\n`), r.Error)
	assert.Equal(t, "acme-1", bound("acme-1", maxText), "a short safe text is kept as it is")
}

// TestWriteTableNewestFirst: one line per record, newest first through
// Newest, with the job, the writes and the fingerprint; a record edited
// into hostile text by hand still prints one line per record.
func TestWriteTableNewestFirst(t *testing.T) {
	older := state.Record{At: at, Verdict: "terminal", Evidence: "pod Failed", Action: "delete-pod", Result: "deleted",
		ObjectKind: "Pod", Namespace: "runners", ObjectName: "acme-1", Pod: "acme-1", RunnerName: "acme-1",
		ObjectResult: "deleted", Exit: &state.RecordExit{Code: 137, Reason: "OOMKilled", Class: "oom-host"}}
	newer := state.Record{At: at.Add(time.Hour), Verdict: "zombie", Evidence: "registration offline", Action: "delete-registration-then-ephemeralrunner",
		Result: "error", ObjectKind: "EphemeralRunner", Namespace: "arc", ObjectName: "acme-set-xyz", RunnerName: "acme-set-xyz\n\tforged row",
		RunnerID: 41, RegistrationResult: "deleted", Error: "delete ephemeralrunner: forbidden",
		Job: &state.RecordJob{Repository: "acme/api", RunID: 103, Name: "test (linux)", Status: "completed", Conclusion: "failure"}}
	h := []state.Record{older, newer}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, Newest(h)))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 3, "a header and a line a record:\n%s", buf.String())
	assert.Regexp(t, `^TIME\s+VERDICT\s+OBJECT\s+RUNNER\s+JOB\s+WRITES\s+FINGERPRINT$`, lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "2026-03-14T10:30:00Z  zombie"), lines[1])
	for _, want := range []string{"EphemeralRunner arc/acme-set-xyz", `acme-set-xyz\n\tforged row (#41)`,
		"acme/api run 103 test (linux) (completed, failure)", "registration=deleted result=error error: delete ephemeralrunner: forbidden",
		"registration offline"} {
		assert.Contains(t, lines[1], want)
	}
	for _, want := range []string{"2026-03-14T09:30:00Z", "terminal", "Pod runners/acme-1", "object=deleted", "[oom-host] exit 137 OOMKilled; pod Failed"} {
		assert.Contains(t, lines[2], want)
	}
	assert.Equal(t, "terminal", h[0].Verdict, "Newest leaves the ledger's order alone")
}

// TestWriteJSONLines: a line of the ledger's JSON a record, escaped again;
// ForRunner keeps one runner's, by the name as it was given.
func TestWriteJSONLines(t *testing.T) {
	h := []state.Record{
		{At: at, Verdict: "zombie", RunnerName: "acme-1", Result: "deleted", Job: &state.RecordJob{Repository: "acme/api", Name: "a\u202eb"}},
		{At: at.Add(time.Minute), Verdict: "ghost", RunnerName: `acme-\x1b`, Result: "deleted"},
	}
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, h))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	assert.NotContains(t, buf.String(), "\u202e", "no raw bidirectional control reaches a terminal")
	var first state.Record
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, `a\u202eb`, first.Job.Name)
	assert.Equal(t, "acme/api", first.Job.Repository)

	assert.Equal(t, h[:1], ForRunner(h, "acme-1"))
	assert.Equal(t, h[1:], ForRunner(h, "acme-\x1b"), "asked for by the name as it was given")
	assert.Empty(t, ForRunner(h, "acme-2"))
}
