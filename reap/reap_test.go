package reap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// recorder stands in for GitHub and Kubernetes in this narrow test of the
// choke point's own logic; the sweep's tests use the real API server.
type recorder struct {
	mu       sync.Mutex
	calls    []string
	ghResult map[int64]fleet.Result
	ghErr    map[int64]error
	podRes   map[string]fleet.Result
	found    map[string]*fleet.Registration
	findErr  map[string]error
	// checkRes and checkErr answer the pre-flight (the server-side dry
	// run) of the write on the named object; by default it is allowed.
	checkRes map[string]fleet.Result
	checkErr map[string]error
	// checkErrWhat refuses the pre-flight of one kind of write on one
	// object, keyed "what:name".
	checkErrWhat map[string]error
	inFlight     int
	maxGH        int
	// releaseErr fails the release of ARC's registration finalizer.
	releaseErr error
}

func (r *recorder) log(s string) { r.mu.Lock(); r.calls = append(r.calls, s); r.mu.Unlock() }

func (r *recorder) DeleteRunner(_ context.Context, s fleet.Scope, id int64) (fleet.Result, error) {
	r.mu.Lock()
	r.inFlight++
	r.maxGH = max(r.maxGH, r.inFlight)
	r.mu.Unlock()
	time.Sleep(time.Millisecond)
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
	r.log(fmt.Sprintf("gh:%s:%d", s, id))
	if err := r.ghErr[id]; err != nil {
		return "", err
	}
	if res, ok := r.ghResult[id]; ok {
		return res, nil
	}
	return fleet.Deleted, nil
}

func (r *recorder) FindRunner(_ context.Context, s fleet.Scope, name string) (*fleet.Registration, error) {
	r.log(fmt.Sprintf("gh-find:%s:%s", s, name))
	return r.found[name], r.findErr[name]
}

func (r *recorder) DeletePod(_ context.Context, p fleet.Pod) (fleet.Result, error) {
	r.log("pod:" + p.Name)
	if res, ok := r.podRes[p.Name]; ok {
		return res, nil
	}
	return fleet.Deleted, nil
}

func (r *recorder) DeleteOwner(_ context.Context, ns string, o fleet.Owner) (fleet.Result, error) {
	r.log("owner:" + o.Kind + ":" + o.Name)
	return fleet.Deleted, nil
}

func (r *recorder) DeleteEphemeralRunner(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	r.log("er:" + er.Name)
	return fleet.Deleted, nil
}

func (r *recorder) RecordEphemeralRunnerEvent(_ context.Context, er fleet.EphemeralRunner, _, _ string) error {
	r.log("er-event:" + er.Name)
	return nil
}

func (r *recorder) RemoveFinalizers(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	r.log("finalizers:" + er.Name)
	return fleet.Deleted, nil
}

func (r *recorder) ReleaseRegistration(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	r.log("release:" + er.Name)
	if err := r.releaseErr; err != nil {
		return "", err
	}
	return fleet.Deleted, nil
}

func (r *recorder) DeleteServiceAccount(_ context.Context, _, name string) (fleet.Result, error) {
	r.log("sa:" + name)
	return fleet.Deleted, nil
}

func (r *recorder) check(what, name string) (fleet.Result, error) {
	r.log("check-" + what + ":" + name)
	if err := r.checkErr[name]; err != nil {
		return "", err
	}
	if err := r.checkErrWhat[what+":"+name]; err != nil {
		return "", err
	}
	if res, ok := r.checkRes[name]; ok {
		return res, nil
	}
	return fleet.Deleted, nil
}

// dryRecorder is the recorder's writes sent as server-side dry runs: the
// pre-flight, answered by checkRes and checkErr.
type dryRecorder struct{ r *recorder }

func (r *recorder) DryRun() fleet.Writes { return dryRecorder{r} }

func (d dryRecorder) DeletePod(_ context.Context, p fleet.Pod) (fleet.Result, error) {
	return d.r.check("pod", p.Name)
}

func (d dryRecorder) DeleteServiceAccount(_ context.Context, _, name string) (fleet.Result, error) {
	return d.r.check("sa", "sa-"+name)
}

func (d dryRecorder) DeleteOwner(_ context.Context, _ string, o fleet.Owner) (fleet.Result, error) {
	return d.r.check("owner", o.Name)
}

func (d dryRecorder) DeleteEphemeralRunner(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	return d.r.check("er", er.Name)
}

func (d dryRecorder) RemoveFinalizers(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	return d.r.check("finalizers", er.Name)
}

func (d dryRecorder) ReleaseRegistration(_ context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	return d.r.check("release", er.Name)
}

// writes are the recorded calls that change something: everything but the
// pre-flight dry runs and the re-checks by name.
func (r *recorder) writes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		if !strings.HasPrefix(c, "check-") && !strings.HasPrefix(c, "gh-find:") {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) RecordEvent(_ context.Context, p fleet.Pod, _, _ string) error {
	r.log("event:" + p.Name)
	return nil
}

var scope = fleet.Scope{Kind: fleet.OrgScope, Name: "acme"}

func cand(v fleet.Verdict, name string, regID int64) reconcile.Candidate {
	c := reconcile.Candidate{Finding: reconcile.Finding{Verdict: v, Key: name, ScopeKey: scope.Key()}, Ready: true}
	if v != fleet.Ghost {
		// A bare runner pod of a pool that gives each pod a ServiceAccount
		// of its own runs as the same-named one.
		c.Pod = &fleet.Pod{Namespace: "ns", Name: name, UID: "u-" + name, ServiceAccount: name}
	}
	if regID != 0 {
		c.Registration = &fleet.Registration{ID: regID, Name: name}
	}
	return c
}

func opts() Options {
	return Options{Limits: reconcile.Limits{MaxActions: 10, MaxFraction: 1}, Concurrency: 4,
		Scopes: map[string]fleet.Scope{scope.Key(): scope}}
}

func results(outs []Outcome) map[string]fleet.Result {
	m := map[string]fleet.Result{}
	for _, o := range outs {
		m[o.Candidate.Key] = o.Result
	}
	return m
}

func TestReapProtocol(t *testing.T) {
	rec := &recorder{
		ghResult: map[int64]fleet.Result{2: fleet.Busy, 3: fleet.AlreadyGone, 6: fleet.Busy},
		ghErr:    map[int64]error{4: errors.New("502 bad gateway")},
		podRes:   map[string]fleet.Result{"replaced": fleet.Changed, "gone": fleet.AlreadyGone},
	}
	outs := New(rec, rec, opts()).Reap(context.Background(), 100, []reconcile.Candidate{
		cand(fleet.Zombie, "zombie", 1),
		cand(fleet.Zombie, "took-a-job", 2),
		cand(fleet.Zombie, "reg-404", 3),
		cand(fleet.Zombie, "gh-down", 4),
		cand(fleet.Unregistered, "replaced", 0),
		cand(fleet.Unregistered, "gone", 0),
		cand(fleet.Terminal, "dead-but-busy", 6),
		cand(fleet.Ghost, "ghost", 7),
	})
	assert.Equal(t, map[string]fleet.Result{
		"zombie":        fleet.Deleted,
		"took-a-job":    fleet.SparedBusy,
		"reg-404":       fleet.Deleted,
		"gh-down":       fleet.Failed,
		"replaced":      fleet.SkippedChanged,
		"gone":          fleet.AlreadyGone,
		"dead-but-busy": fleet.Deleted,
		"ghost":         fleet.Deleted,
	}, results(outs))

	// The pods of a busy runner and of a failed registration delete are
	// never touched (rules 2 and 3).
	assert.NotContains(t, rec.calls, "pod:took-a-job")
	assert.NotContains(t, rec.calls, "pod:gh-down")
	// A terminal pod goes even when GitHub says busy (rule 2's exception).
	assert.Contains(t, rec.calls, "pod:dead-but-busy")
	// Each pod's registration went before its pod, one GitHub delete at
	// a time, and each pod's delete was proved allowed before anything
	// was written for it.
	for name, id := range map[string]int64{"zombie": 1, "dead-but-busy": 6} {
		gh := indexOf(rec.calls, fmt.Sprintf("gh:org:acme:%d", id))
		assert.Less(t, indexOf(rec.calls, "check-pod:"+name), gh, "pre-flight first: %v", rec.calls)
		assert.Less(t, gh, indexOf(rec.calls, "pod:"+name), "registration before pod: %v", rec.calls)
	}
	assert.Equal(t, 1, rec.maxGH, "GitHub deletes are serial")
	// The Event follows the delete it records, and only a delete that
	// did something is recorded: a pod replaced since it was judged, or
	// one already gone, gets none.
	for _, name := range []string{"zombie", "dead-but-busy", "reg-404"} {
		assert.Less(t, indexOf(rec.calls, "pod:"+name), indexOf(rec.calls, "event:"+name), "event after the delete: %v", rec.calls)
	}
	for _, name := range []string{"replaced", "gone", "took-a-job", "gh-down"} {
		assert.NotContains(t, rec.calls, "event:"+name)
	}
	assert.NotContains(t, fmt.Sprint(rec.calls), "sa:", "ServiceAccounts are only deleted when configured")
}

// An absent registration is re-checked by name right before its pod goes,
// because there is no registration delete whose 422 could protect a job.
func TestReapRechecksAbsenceBeforeDeletingPod(t *testing.T) {
	rec := &recorder{
		found: map[string]*fleet.Registration{
			"appeared-busy": {ID: 3, Name: "appeared-busy", Busy: true},
			"appeared-idle": {ID: 4, Name: "appeared-idle", Online: true},
		},
		findErr: map[string]error{"gh-down": errors.New("502")},
	}
	cs := []reconcile.Candidate{
		cand(fleet.Unregistered, "still-absent", 0),
		cand(fleet.Unregistered, "appeared-busy", 0),
		cand(fleet.Zombie, "appeared-idle", 0),
		cand(fleet.OrphanStamped, "gh-down", 0),
		cand(fleet.Terminal, "dead", 0),
	}
	for i := range cs {
		if cs[i].Pod != nil {
			cs[i].Pod.RunnerName = cs[i].Pod.Name
		}
	}
	outs := New(rec, rec, opts()).Reap(context.Background(), 100, cs)
	assert.Equal(t, map[string]fleet.Result{
		"still-absent":  fleet.Deleted,
		"appeared-busy": fleet.SparedBusy,
		"appeared-idle": fleet.SkippedRegistered,
		"gh-down":       fleet.Failed,
		"dead":          fleet.Deleted,
	}, results(outs))
	assert.NotContains(t, rec.calls, "gh-find:org:acme:dead", "a terminal pod needs no re-check")
	for _, name := range []string{"appeared-busy", "appeared-idle", "gh-down"} {
		assert.NotContains(t, rec.calls, "pod:"+name)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestReapBoundsAndDryRunShareOneChokePoint(t *testing.T) {
	cs := []reconcile.Candidate{
		cand(fleet.Ghost, "ghost", 9),
		cand(fleet.Zombie, "z1", 1),
		cand(fleet.Zombie, "z2", 2),
		cand(fleet.Terminal, "t1", 0),
	}
	for _, dry := range []bool{false, true} {
		t.Run(fmt.Sprintf("dry-run=%v", dry), func(t *testing.T) {
			rec := &recorder{}
			o := opts()
			o.DryRun, o.Limits.MaxActions = dry, 2
			outs := New(rec, rec, o).Reap(context.Background(), 100, cs)
			admitted := fleet.Deleted
			if dry {
				admitted = fleet.WouldDelete
				assert.Empty(t, rec.writes(), "dry-run changes nothing")
			}
			// Terminal first, then the older-priority zombie; the rest wait.
			assert.Equal(t, map[string]fleet.Result{"t1": admitted, "z1": admitted, "z2": fleet.Deferred, "ghost": fleet.Deferred}, results(outs))
			for _, out := range outs {
				assert.Equal(t, dry, out.DryRun)
			}
		})
	}
}

func TestReapServiceAccountWhenConfigured(t *testing.T) {
	rec := &recorder{podRes: map[string]fleet.Result{"replaced": fleet.Changed}}
	o := opts()
	o.DeleteServiceAccount = true
	outs := New(rec, rec, o).Reap(context.Background(), 10, []reconcile.Candidate{
		cand(fleet.Unregistered, "bare", 0), cand(fleet.Unregistered, "replaced", 0),
	})
	require.Len(t, outs, 2)
	assert.Contains(t, rec.calls, "sa:bare")
	assert.NotContains(t, rec.calls, "sa:replaced", "a pod that was not deleted keeps its ServiceAccount")
}

func TestReapStopsAtDeadline(t *testing.T) {
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	outs := New(rec, rec, opts()).Reap(ctx, 10, []reconcile.Candidate{cand(fleet.Zombie, "z", 1)})
	assert.Equal(t, fleet.NotReached, outs[0].Result)
	assert.Empty(t, rec.calls)
}

// A pod that ARC owns is removed through its owner, after its registration;
// ARC's own leaks delete the EphemeralRunner; a stuck one is only reported
// unless finalizer removal is on, and being reported takes no place in the
// bound.
func TestReapARCOwnerAware(t *testing.T) {
	owned := func(kind, apiVersion, name string, regID int64) reconcile.Candidate {
		c := cand(fleet.Zombie, name, regID)
		c.Pod.Owner = &fleet.Owner{APIVersion: apiVersion, Kind: kind, Name: name, UID: "owner-" + name}
		c.Pod.RunnerName = name
		return c
	}
	arcLeak := func(v fleet.Verdict, name string, regID int64) reconcile.Candidate {
		c := cand(fleet.Ghost, name, regID) // no pod
		c.Verdict = v
		c.EphemeralRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: name, UID: "u-" + name,
			Finalizers: []string{fleet.ARCFinalizer, fleet.ARCRegistrationFinalizer}}
		return c
	}
	for _, removeFinalizers := range []bool{false, true} {
		t.Run(fmt.Sprintf("remove-finalizers=%v", removeFinalizers), func(t *testing.T) {
			rec := &recorder{}
			o := opts()
			o.RemoveFinalizers, o.DeleteServiceAccount = removeFinalizers, true
			o.Limits.MaxActions = 4
			r := New(rec, rec, o)
			observed := owned(fleet.EphemeralRunnerKind, fleet.EphemeralRunnerAPIVersion, "set-runner-a", 1)
			observed.OwnerRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: "set-runner-a", UID: "owner-set-runner-a", ResourceVersion: "4", ScopeKey: scope.Key(), RunnerID: 1}
			cs := []reconcile.Candidate{
				observed,
				owned(fleet.EphemeralRunnerKind, fleet.EphemeralRunnerAPIVersion, "set-runner-unlisted", 2),
				owned(fleet.LegacyRunnerKind, fleet.LegacyRunnerAPIVersion, "legacy-b", 0),
				arcLeak(fleet.ARCFailed, "set-runner-failed", 3),
				arcLeak(fleet.ARCPodless, "set-runner-podless", 0),
				arcLeak(fleet.ARCStuckDeleting, "set-runner-stuck", 0),
			}
			outs := r.Reap(context.Background(), 10, cs)
			byKey := map[string]Outcome{}
			for _, out := range outs {
				byKey[out.Candidate.Key] = out
			}
			assert.Equal(t, DeleteRegistrationThenEphemeralRunner, byKey["set-runner-a"].Action)
			assert.Equal(t, "EphemeralRunner ns/set-runner-a", byKey["set-runner-a"].Object)
			assert.Equal(t, DeleteRunner, byKey["legacy-b"].Action)
			assert.Equal(t, "Runner ns/legacy-b", byKey["legacy-b"].Object)
			assert.Equal(t, DeleteRegistrationThenEphemeralRunner, byKey["set-runner-failed"].Action)
			assert.Equal(t, DeleteEphemeralRunner, byKey["set-runner-podless"].Action)
			for _, k := range []string{"set-runner-a", "legacy-b", "set-runner-failed", "set-runner-podless"} {
				assert.Equal(t, fleet.Deleted, byKey[k].Result, k)
			}
			// Owners deleted, never the pods; no ServiceAccount for ARC's pods.
			assert.Contains(t, rec.calls, "er:set-runner-a")
			// One whose EphemeralRunner was not listed is only reported:
			// nothing could release ARC's registration finalizer.
			unlisted := byKey["set-runner-unlisted"]
			assert.Equal(t, Report, unlisted.Action)
			assert.Equal(t, fleet.Reported, unlisted.Result)
			assert.ErrorIs(t, unlisted.Err, errOwnerUnobserved)
			assert.NotContains(t, fmt.Sprint(rec.calls), "set-runner-unlisted")
			assert.Contains(t, rec.calls, "owner:Runner:legacy-b")
			assert.Contains(t, rec.calls, "er:set-runner-failed")
			assert.Contains(t, rec.calls, "er:set-runner-podless")
			for _, call := range rec.calls {
				assert.False(t, strings.HasPrefix(call, "pod:"), "a pod ARC owns is never deleted itself: %s", call)
			}
			assert.Less(t, indexOf(rec.calls, "check-pod:set-runner-a"), indexOf(rec.calls, "gh:org:acme:1"),
				"the pod judged is checked before anything is written")
			assert.Less(t, lastIndexOf(rec.calls, "check-pod:set-runner-a"), indexOf(rec.calls, "er:set-runner-a"),
				"and again right before its owner goes")
			assert.NotContains(t, fmt.Sprint(rec.calls), "sa:")
			assert.Less(t, indexOf(rec.calls, "gh:org:acme:3"), indexOf(rec.calls, "er:set-runner-failed"), "registration first")
			assert.Less(t, indexOf(rec.calls, "er:set-runner-a"), indexOf(rec.calls, "event:set-runner-a"), "the Event follows the owner's delete")
			assert.Less(t, indexOf(rec.calls, "er:set-runner-podless"), indexOf(rec.calls, "er-event:set-runner-podless"), "an Event on the EphemeralRunner after its delete")

			stuck := byKey["set-runner-stuck"]
			if removeFinalizers {
				assert.Equal(t, RemoveFinalizers, stuck.Action)
				assert.Equal(t, fleet.Deferred, stuck.Result, "it takes its place in the bound of 4")
			} else {
				assert.Equal(t, Report, stuck.Action)
				assert.Equal(t, fleet.Reported, stuck.Result)
				assert.NotContains(t, fmt.Sprint(rec.calls), "finalizers:")
			}
		})
	}
}

// A sweep near its deadline starts no new action, so that the one begun can
// finish and the sweep can still report what it did not reach.
func TestReapKeepsSpareTimeBeforeDeadline(t *testing.T) {
	rec := &recorder{}
	o := opts()
	o.Spare = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outs := New(rec, rec, o).Reap(ctx, 10, []reconcile.Candidate{cand(fleet.Zombie, "z", 1), cand(fleet.Terminal, "t", 0)})
	for _, out := range outs {
		assert.Equal(t, fleet.NotReached, out.Result)
	}
	assert.Empty(t, rec.calls)

	o.Spare = time.Second
	outs = New(rec, rec, o).Reap(ctx, 10, []reconcile.Candidate{cand(fleet.Terminal, "t", 0)})
	assert.Equal(t, fleet.Deleted, outs[0].Result, "with time to spare the action runs")
}

// Dry-run walks the real path up to the first write: the re-check by name
// and the pre-flight run, so that it answers what a real sweep would, and
// only where a real sweep would write does it say would-delete.
func TestReapDryRunMakesTheSameDecisions(t *testing.T) {
	build := func() ([]reconcile.Candidate, *recorder) {
		rec := &recorder{
			found: map[string]*fleet.Registration{
				"appeared-idle": {ID: 4, Name: "appeared-idle", Online: true},
				"appeared-busy": {ID: 5, Name: "appeared-busy", Busy: true},
			},
			findErr:  map[string]error{"gh-down": errors.New("502")},
			checkRes: map[string]fleet.Result{"replaced": fleet.Changed, "gone": fleet.AlreadyGone},
			checkErr: map[string]error{"forbidden": errors.New(`pods "forbidden" is forbidden: cannot delete`)},
		}
		cs := []reconcile.Candidate{
			cand(fleet.Unregistered, "still-absent", 0),
			cand(fleet.Unregistered, "appeared-idle", 0),
			cand(fleet.Unregistered, "appeared-busy", 0),
			cand(fleet.Unregistered, "gh-down", 0),
			cand(fleet.Zombie, "replaced", 2),
			cand(fleet.Zombie, "gone", 3),
			cand(fleet.Zombie, "forbidden", 6),
			cand(fleet.Zombie, "zombie", 7),
			cand(fleet.Ghost, "ghost", 8),
		}
		for i := range cs {
			if cs[i].Pod != nil {
				cs[i].Pod.RunnerName = cs[i].Pod.Name
			}
		}
		return cs, rec
	}
	real, dry := map[string]fleet.Result{}, map[string]fleet.Result{}
	for _, isDry := range []bool{false, true} {
		cs, rec := build()
		o := opts()
		o.DryRun = isDry
		outs := New(rec, rec, o).Reap(context.Background(), 100, cs)
		if isDry {
			dry = results(outs)
			assert.Empty(t, rec.writes(), "dry-run writes nothing")
			for _, out := range outs {
				if out.Candidate.Key == "forbidden" {
					assert.ErrorContains(t, out.Err, "would be refused")
				}
			}
		} else {
			real = results(outs)
		}
	}
	assert.Equal(t, map[string]fleet.Result{
		"still-absent":  fleet.Deleted,
		"appeared-idle": fleet.SkippedRegistered,
		"appeared-busy": fleet.SparedBusy,
		"gh-down":       fleet.Failed,
		"replaced":      fleet.SkippedChanged,
		"gone":          fleet.AlreadyGone,
		"forbidden":     fleet.Failed,
		"zombie":        fleet.Deleted,
		"ghost":         fleet.Deleted,
	}, real)
	want := map[string]fleet.Result{}
	for k, v := range real {
		if v == fleet.Deleted {
			v = fleet.WouldDelete
		}
		want[k] = v
	}
	assert.Equal(t, want, dry, "dry-run decides as the real sweep did; only the writes become would-delete")
}

// Item 7: before the first write for a candidate, its Kubernetes write is
// proved allowed by a server-side dry run. When that is refused, no GitHub
// delete and no Event are made, and the error says why; a precondition
// that no longer holds is a skip, an object already gone is already-gone,
// neither with a GitHub delete.
func TestReapPreflightGuardsEveryFirstWrite(t *testing.T) {
	forbidden := errors.New(`pods "x" is forbidden: User "reaper" cannot delete resource "pods"`)
	owned := func(name string, regID int64) reconcile.Candidate {
		c := cand(fleet.Zombie, name, regID)
		c.Pod.Owner = &fleet.Owner{APIVersion: fleet.LegacyRunnerAPIVersion, Kind: fleet.LegacyRunnerKind, Name: name, UID: "o-" + name}
		return c
	}
	arcLeak := func(v fleet.Verdict, name string, regID int64) reconcile.Candidate {
		c := cand(fleet.Ghost, name, regID)
		c.Verdict = v
		c.EphemeralRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: name, UID: "u-" + name,
			Finalizers: []string{fleet.ARCFinalizer, fleet.ARCRegistrationFinalizer}}
		if v == fleet.ARCStuckDeleting {
			c.EphemeralRunner.DeletingSince = fleet.StampOf(time.Now())
		}
		return c
	}
	rec := &recorder{
		checkErr: map[string]error{
			"pod-refused": forbidden, "owner-refused": forbidden, "er-refused": forbidden,
			"stuck-refused": forbidden, "sa-sa-refused": forbidden, "unreg-refused": forbidden,
			"dead-refused": forbidden,
		},
		checkRes: map[string]fleet.Result{"pod-changed": fleet.Changed, "pod-gone": fleet.AlreadyGone, "sa-pod-ok": fleet.AlreadyGone},
	}
	o := opts()
	o.DeleteServiceAccount, o.RemoveFinalizers = true, true
	cs := []reconcile.Candidate{
		cand(fleet.Zombie, "pod-refused", 1),
		owned("owner-refused", 2),
		arcLeak(fleet.ARCFailed, "er-refused", 3),
		arcLeak(fleet.ARCStuckDeleting, "stuck-refused", 0),
		cand(fleet.Zombie, "sa-refused", 5),
		cand(fleet.Unregistered, "unreg-refused", 0),
		cand(fleet.Terminal, "dead-refused", 6),
		cand(fleet.Zombie, "pod-changed", 7),
		cand(fleet.Zombie, "pod-gone", 8),
		cand(fleet.Zombie, "pod-ok", 9),
	}
	for i := range cs {
		if cs[i].Pod != nil {
			cs[i].Pod.RunnerName = cs[i].Pod.Name
		}
	}
	outs := New(rec, rec, o).Reap(context.Background(), 100, cs)
	byKey := map[string]Outcome{}
	for _, out := range outs {
		byKey[out.Candidate.Key] = out
	}
	assert.Equal(t, map[string]fleet.Result{
		"pod-refused":   fleet.Failed,
		"owner-refused": fleet.Failed,
		"er-refused":    fleet.Failed,
		"stuck-refused": fleet.Failed,
		"sa-refused":    fleet.Failed,
		"unreg-refused": fleet.Failed,
		"dead-refused":  fleet.Failed,
		"pod-changed":   fleet.SkippedChanged,
		"pod-gone":      fleet.AlreadyGone,
		"pod-ok":        fleet.Deleted,
	}, results(outs))
	// Only pod-ok was written: its registration, Event, pod and
	// ServiceAccount (a missing ServiceAccount does not hold the pod).
	assert.Equal(t, []string{"gh:org:acme:9", "pod:pod-ok", "sa:pod-ok", "event:pod-ok"}, rec.writes())
	assert.NotContains(t, fmt.Sprint(rec.calls), "gh-find:org:acme:unreg-refused", "refused before the re-check")
	for _, k := range []string{"pod-refused", "owner-refused", "er-refused", "sa-refused", "dead-refused"} {
		assert.ErrorContains(t, byKey[k].Err, "the Kubernetes write would be refused, so registration", k)
		assert.ErrorContains(t, byKey[k].Err, "left alone", k)
		assert.ErrorIs(t, byKey[k].Err, forbidden, k)
	}
	assert.ErrorContains(t, byKey["unreg-refused"].Err, "would be refused, so nothing was changed")
	assert.Equal(t, fleet.Changed, byKey["pod-changed"].ObjectResult)
	assert.Equal(t, fleet.AlreadyGone, byKey["pod-gone"].ObjectResult)
}

// A re-check by name proves an absence only for the moment it answers: the
// candidate's own Kubernetes delete follows it directly, before any other
// candidate's GitHub call, however many deletes run at once.
func TestReapRecheckIsFollowedByItsOwnDelete(t *testing.T) {
	rec := &recorder{}
	var cs []reconcile.Candidate
	for i := 0; i < 6; i++ {
		c := cand(fleet.Unregistered, fmt.Sprintf("u%d", i), 0)
		c.Pod.RunnerName = c.Pod.Name
		cs = append(cs, c)
		cs = append(cs, cand(fleet.Zombie, fmt.Sprintf("z%d", i), int64(i+1)))
	}
	o := opts()
	o.Limits.MaxActions = len(cs)
	outs := New(rec, rec, o).Reap(context.Background(), 100, cs)
	for _, out := range outs {
		assert.Equal(t, fleet.Deleted, out.Result, out.Candidate.Key)
	}
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("u%d", i)
		find, del := indexOf(rec.calls, "gh-find:org:acme:"+name), indexOf(rec.calls, "pod:"+name)
		require.GreaterOrEqual(t, find, 0)
		require.Greater(t, del, find)
		for _, c := range rec.calls[find+1 : del] {
			assert.False(t, strings.HasPrefix(c, "gh"), "GitHub call %s between the re-check of %s and its delete: %v", c, name, rec.calls)
		}
	}
	assert.Equal(t, 1, rec.maxGH, "GitHub calls stay serial")
}

// ctxSeer cancels the sweep's context while a registration delete is in
// flight, as a SIGTERM or the deadline would, and records what the
// context of each write said at that moment.
type ctxSeer struct {
	*recorder
	cancel func()
	mu     sync.Mutex
	seen   map[string]error
	// deadlines is each write's context's deadline, where it had one.
	deadlines map[string]time.Time
	// block makes DeleteRunner wait for its context to end.
	block bool
}

func (c *ctxSeer) saw(call string, ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[call] = ctx.Err()
	if d, ok := ctx.Deadline(); ok {
		if c.deadlines == nil {
			c.deadlines = map[string]time.Time{}
		}
		c.deadlines[call] = d
	}
}

func (c *ctxSeer) DeleteRunner(ctx context.Context, s fleet.Scope, id int64) (fleet.Result, error) {
	c.cancel()
	if c.block {
		<-ctx.Done()
		c.saw(fmt.Sprintf("gh:%d", id), ctx)
		return "", ctx.Err()
	}
	c.saw(fmt.Sprintf("gh:%d", id), ctx)
	return c.recorder.DeleteRunner(ctx, s, id)
}

func (c *ctxSeer) RecordEvent(ctx context.Context, p fleet.Pod, reason, msg string) error {
	c.saw("event:"+p.Name, ctx)
	return c.recorder.RecordEvent(ctx, p, reason, msg)
}

func (c *ctxSeer) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	c.saw("pod:"+p.Name, ctx)
	return c.recorder.DeletePod(ctx, p)
}

// The sweep's context ending (a signal, the deadline) while an action is
// in flight stops the actions after it, never the one begun: its
// registration delete, Event and pod delete all run under a context that
// the sweep's end does not cancel, so a registration is never left deleted
// with its pod in place.
func TestReapFinishesTheActionInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &ctxSeer{recorder: &recorder{}, cancel: cancel, seen: map[string]error{}}
	outs := New(c, c, opts()).Reap(ctx, 10, []reconcile.Candidate{cand(fleet.Zombie, "first", 1), cand(fleet.Zombie, "second", 2)})
	assert.Equal(t, map[string]fleet.Result{"first": fleet.Deleted, "second": fleet.NotReached}, results(outs))
	assert.Equal(t, map[string]error{"gh:1": nil, "event:first": nil, "pod:first": nil}, c.seen,
		"no write of the action in flight saw its context cancelled")
	assert.Equal(t, []string{"gh:org:acme:1", "pod:first", "event:first"}, c.writes())
}

// Detached is not unbounded: ActionTimeout ends an action that hangs.
func TestReapBoundsEachAction(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &ctxSeer{recorder: &recorder{}, cancel: cancel, seen: map[string]error{}, block: true}
	o := opts()
	o.ActionTimeout = 50 * time.Millisecond
	start := time.Now()
	outs := New(c, c, o).Reap(ctx, 10, []reconcile.Candidate{cand(fleet.Zombie, "hangs", 1), cand(fleet.Zombie, "next", 2)})
	end := time.Now()
	assert.Equal(t, map[string]fleet.Result{"hangs": fleet.Failed, "next": fleet.NotReached}, results(outs))
	assert.ErrorIs(t, outs[0].Err, context.DeadlineExceeded)
	assert.Equal(t, map[string]error{"gh:1": context.DeadlineExceeded}, c.seen, "the action's own bound ended it, not the sweep's cancel")
	// The bound is ActionTimeout from when the action began, read from the
	// context's deadline rather than from how long the machine took.
	require.Contains(t, c.deadlines, "gh:1")
	assert.False(t, c.deadlines["gh:1"].Before(start.Add(o.ActionTimeout)), "the action had its ActionTimeout")
	assert.False(t, c.deadlines["gh:1"].After(end.Add(o.ActionTimeout)), "and no more than its ActionTimeout")
}

// lastIndexOf is the position of the last call equal to want, or -1.
func lastIndexOf(calls []string, want string) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i] == want {
			return i
		}
	}
	return -1
}

// A terminal pod that ARC owns goes by its owner's delete, and the owner's
// delete takes whatever pod the owner has by then. So a 422 on the
// registration (ARC's new pod took a job on it), or a pod replaced since it
// was judged, spares the owner: the kubelet's word was about the old pod.
func TestReapARCOwnedTerminalPodIsNotTakenOnFaith(t *testing.T) {
	owned := func(name string, id int64) reconcile.Candidate {
		c := cand(fleet.Terminal, name, id)
		c.Pod.Owner = &fleet.Owner{APIVersion: fleet.LegacyRunnerAPIVersion, Kind: fleet.LegacyRunnerKind,
			Name: "runner-" + name, UID: "owner-" + name}
		return c
	}
	rec := &recorder{
		ghResult: map[int64]fleet.Result{1: fleet.Busy},
		checkRes: map[string]fleet.Result{"replaced": fleet.Changed},
	}
	outs := New(rec, rec, opts()).Reap(context.Background(), 100,
		[]reconcile.Candidate{owned("busy", 1), owned("replaced", 2)})
	byKey := map[string]Outcome{}
	for _, o := range outs {
		byKey[o.Candidate.Key] = o
	}
	assert.Equal(t, fleet.SparedBusy, byKey["busy"].Result, "a 422 spares the owner of a dead pod too")
	assert.Equal(t, fleet.SkippedChanged, byKey["replaced"].Result)
	for _, call := range rec.calls {
		assert.False(t, strings.HasPrefix(call, "owner:"), "no owner was deleted: %v", rec.calls)
	}
	assert.NotContains(t, rec.calls, "gh:org:acme:2", "a replaced pod's registration is left alone")
}

// slowGitHub answers a registration delete 204 only once the action's own
// budget has run out: GitHub did it, and the answer came in at the wire's
// last moment. answered is when it came.
type slowGitHub struct {
	*ctxSeer
	answered time.Time
}

func (s *slowGitHub) DeleteRunner(ctx context.Context, sc fleet.Scope, id int64) (fleet.Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		return "", errors.New("the registration delete had no budget to run out")
	}
	<-ctx.Done()
	s.answered = time.Now()
	s.saw(fmt.Sprintf("gh:%d", id), ctx)
	return s.recorder.DeleteRunner(context.Background(), sc, id)
}

// A registration delete that succeeds slowly still leaves its object the
// time to follow: the Kubernetes writes run under a budget of their own,
// so a slow GitHub never leaves a registration deleted and its pod in
// place. Each write's budget is read from its context's deadline, not
// from the clock at the moment it ran, so the test holds however late
// the machine runs the write.
func TestReapSlowRegistrationDeleteStillLetsThePodGo(t *testing.T) {
	c := &ctxSeer{recorder: &recorder{}, cancel: func() {}, seen: map[string]error{}}
	o := opts()
	o.ActionTimeout = 10 * time.Millisecond
	gh := &slowGitHub{ctxSeer: c}
	outs := New(gh, c, o).Reap(context.Background(), 10, []reconcile.Candidate{cand(fleet.Zombie, "slow", 1)})
	assert.Equal(t, map[string]fleet.Result{"slow": fleet.Deleted}, results(outs))
	assert.ErrorIs(t, c.seen["gh:1"], context.DeadlineExceeded, "the registration delete used up its budget")
	require.Contains(t, c.deadlines, "gh:1")
	assert.False(t, gh.answered.Before(c.deadlines["gh:1"]), "GitHub answered at its budget's end")
	budgets := map[string]time.Duration{"pod:slow": o.ActionTimeout, "event:slow": DefaultEventTimeout}
	for call, budget := range budgets {
		require.Contains(t, c.deadlines, call, "%s ran under a budget", call)
		assert.False(t, c.deadlines[call].Before(gh.answered.Add(budget)),
			"%s had a live context of its own, its whole budget (%v) from after the registration delete used up its budget", call, budget)
		if c.seen[call] != nil {
			// Only its own budget may have ended it, never the
			// registration's: it ran that late.
			assert.ErrorIs(t, c.seen[call], context.DeadlineExceeded, call)
		}
	}
	assert.Len(t, c.seen, 3, "the registration, the pod and its Event: %v", c.seen)
}

// Only the ServiceAccount the pod ran as goes with it: a pod that ran as
// the namespace's default, or as another account, leaves the same-named
// ServiceAccount (someone else's) alone, and so does a pod named default.
func TestReapDeletesOnlyThePodsOwnServiceAccount(t *testing.T) {
	rec := &recorder{}
	o := opts()
	o.DeleteServiceAccount = true
	ranAs := func(name, sa string) reconcile.Candidate {
		c := cand(fleet.Terminal, name, 0)
		c.Pod.ServiceAccount = sa
		return c
	}
	outs := New(rec, rec, o).Reap(context.Background(), 100, []reconcile.Candidate{
		ranAs("own", "own"), ranAs("ran-as-default", "default"), ranAs("ran-as-other", "builder"), ranAs("default", "default"),
	})
	assert.Equal(t, map[string]fleet.Result{"own": fleet.Deleted, "ran-as-default": fleet.Deleted, "ran-as-other": fleet.Deleted, "default": fleet.Deleted}, results(outs))
	var sas []string
	for _, call := range rec.calls {
		if strings.HasPrefix(call, "sa:") || strings.HasPrefix(call, "check-sa:") {
			sas = append(sas, call)
		}
	}
	assert.Equal(t, []string{"check-sa:sa-own", "sa:own"}, sas, "only the ServiceAccount the pod ran as")
}

// slowEvents is a Kubernetes whose Event create is throttled or held by a
// slow admission webhook: it answers only when its context ends, as
// client-go's retries of a 429 do once they run out of time. Its deletes
// honour their context, as the API server's client does.
type slowEvents struct {
	*recorder
	mu   sync.Mutex
	seen map[string]error
}

func (s *slowEvents) RecordEvent(ctx context.Context, p fleet.Pod, _, _ string) error {
	<-ctx.Done()
	s.log("event-gave-up:" + p.Name)
	return fmt.Errorf("record event on pod %s: %w", p.Name, ctx.Err())
}

func (s *slowEvents) RecordEphemeralRunnerEvent(ctx context.Context, er fleet.EphemeralRunner, _, _ string) error {
	<-ctx.Done()
	s.log("er-event-gave-up:" + er.Name)
	return fmt.Errorf("record event on ephemeralrunner %s: %w", er.Name, ctx.Err())
}

func (s *slowEvents) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	s.mu.Lock()
	s.seen["pod:"+p.Name] = ctx.Err()
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	return s.recorder.DeletePod(ctx, p)
}

func (s *slowEvents) DeleteEphemeralRunner(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	s.mu.Lock()
	s.seen["er:"+er.Name] = ctx.Err()
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("delete ephemeralrunner %s: %w", er.Name, err)
	}
	return s.recorder.DeleteEphemeralRunner(ctx, er)
}

// An Event that is throttled or slow takes nothing from the
// writes that must follow a registration delete. The object goes with a
// live context of its own; the Event, tried after it, is given up at its
// own bound and only reported. On the old order (Event first, in the same
// budget as the delete) the Event used up the budget and the pod delete
// failed with the registration already gone.
func TestReapOptionalEventNeverTakesTheDeleteBudget(t *testing.T) {
	er := func(name string, id int64) reconcile.Candidate {
		c := reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.ARCFailed, Key: name, ScopeKey: scope.Key(),
			EphemeralRunner: &fleet.EphemeralRunner{Namespace: "ns", Name: name, UID: "u-" + name, ResourceVersion: "1"},
			Registration:    &fleet.Registration{ID: id, Name: name}}, Ready: true}
		return c
	}
	for _, tc := range []struct {
		name   string
		c      reconcile.Candidate
		object string
	}{
		{"zombie pod after its registration", cand(fleet.Zombie, "zombie", 1), "pod:zombie"},
		{"unregistered pod after its re-check", cand(fleet.Unregistered, "unregistered", 0), "pod:unregistered"},
		{"terminal pod", cand(fleet.Terminal, "terminal", 0), "pod:terminal"},
		{"EphemeralRunner after its registration", er("failed-er", 2), "er:failed-er"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &slowEvents{recorder: &recorder{}, seen: map[string]error{}}
			o := opts()
			// The object's budget is long and nothing waits it out, so
			// its write's context is live however late the machine runs
			// it; the Event's is short, and the Event waits it out.
			o.ActionTimeout = time.Minute
			o.EventTimeout = 50 * time.Millisecond
			outs := New(s, s, o).Reap(context.Background(), 10, []reconcile.Candidate{tc.c})
			require.Len(t, outs, 1)
			out := outs[0]
			assert.Equal(t, fleet.Deleted, out.Result, "the object went: %v", out.Err)
			assert.NoError(t, out.Err)
			assert.Equal(t, fleet.Deleted, out.ObjectResult)
			assert.Equal(t, map[string]error{tc.object: nil}, s.seen, "the object's write had a live context")
			require.Error(t, out.EventErr, "the Event that never answered is reported")
			assert.ErrorIs(t, out.EventErr, context.DeadlineExceeded)
			writes := s.writes()
			require.NotEmpty(t, writes)
			assert.Contains(t, writes[len(writes)-1], "event-gave-up:", "the Event came last, ended by its own bound: %v", writes)
		})
	}
}

// An Event records what was done, so a write that did nothing gets none:
// a pod replaced since it was judged, one already gone, a refused delete.
// And no Event is sent once the sweep's deadline has passed: the report
// still needs that time.
func TestReapEventOnlyForAWriteThatDidSomething(t *testing.T) {
	rec := &recorder{podRes: map[string]fleet.Result{"replaced": fleet.Changed, "gone": fleet.AlreadyGone}}
	outs := New(rec, rec, opts()).Reap(context.Background(), 10, []reconcile.Candidate{
		cand(fleet.Terminal, "replaced", 0), cand(fleet.Terminal, "gone", 0), cand(fleet.Terminal, "done", 0),
	})
	assert.Equal(t, map[string]fleet.Result{"replaced": fleet.SkippedChanged, "gone": fleet.AlreadyGone, "done": fleet.Deleted}, results(outs))
	var events []string
	for _, c := range rec.calls {
		if strings.HasPrefix(c, "event:") {
			events = append(events, c)
		}
	}
	assert.Equal(t, []string{"event:done"}, events)

	r := New(rec, rec, opts())
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	o := &Outcome{Candidate: cand(fleet.Terminal, "late", 0), ObjectResult: fleet.Deleted}
	r.recordEvent(ctx, o)
	require.Error(t, o.EventErr)
	assert.Contains(t, o.EventErr.Error(), "deadline has passed")
	assert.NotContains(t, rec.calls, "event:late")
}

// An Event holds no slot. With one slot, the
// second candidate's pod, whose registration is already deleted, goes
// while the first candidate's Event still hangs, not after it: a's Event
// answers only once b's pod has gone, so were it holding the slot b's pod
// would wait for it to be given up at its bound, a minute on.
func TestReapEventHoldsNoSlot(t *testing.T) {
	k := &eventAwaitsPod{recorder: &recorder{}, event: "a", pod: "b", gone: make(chan struct{})}
	o := opts()
	o.Concurrency = 1
	o.EventTimeout = time.Minute
	outs := New(k, k, o).Reap(context.Background(), 10, []reconcile.Candidate{cand(fleet.Zombie, "a", 1), cand(fleet.Zombie, "b", 2)})
	assert.Equal(t, map[string]fleet.Result{"a": fleet.Deleted, "b": fleet.Deleted}, results(outs))
	calls := k.writes()
	require.Contains(t, calls, "event:a", "a's Event answered once b's pod had gone, never given up: %v", calls)
	assert.Less(t, indexOf(calls, "pod:b"), indexOf(calls, "event:a"), "b's pod did not wait on a's Event: %v", calls)
	assert.Less(t, indexOf(calls, "gh:org:acme:2"), indexOf(calls, "event:a"), "nor did b's registration delete: %v", calls)
}

// eventAwaitsPod is a Kubernetes whose Event on one pod answers only once
// another pod has been deleted, and is given up if its context ends first;
// every other write answers at once.
type eventAwaitsPod struct {
	*recorder
	event, pod string
	gone       chan struct{}
}

func (k *eventAwaitsPod) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	res, err := k.recorder.DeletePod(ctx, p)
	if p.Name == k.pod {
		close(k.gone)
	}
	return res, err
}

func (k *eventAwaitsPod) RecordEvent(ctx context.Context, p fleet.Pod, reason, msg string) error {
	if p.Name == k.event {
		select {
		case <-k.gone:
		case <-ctx.Done():
			k.log("event-gave-up:" + p.Name)
			return ctx.Err()
		}
	}
	return k.recorder.RecordEvent(ctx, p, reason, msg)
}

// budgetSeer is a world that notes the deadline of each write's context
// as the call began; a pod delete it is told hangs fails at once, as one
// that hung to its deadline would.
type budgetSeer struct {
	*recorder
	mu        sync.Mutex
	deadlines map[string]time.Time
	podHangs  bool
}

func (b *budgetSeer) note(call string, ctx context.Context) {
	d, ok := ctx.Deadline()
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadlines == nil {
		b.deadlines = map[string]time.Time{}
	}
	b.deadlines[call] = d
}

func (b *budgetSeer) DeleteRunner(ctx context.Context, sc fleet.Scope, id int64) (fleet.Result, error) {
	b.note(fmt.Sprintf("gh:%d", id), ctx)
	return b.recorder.DeleteRunner(context.Background(), sc, id)
}

func (b *budgetSeer) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	b.note("pod:"+p.Name, ctx)
	if b.podHangs {
		return "", fmt.Errorf("delete pod %s: %w", p.Name, context.DeadlineExceeded)
	}
	return b.recorder.DeletePod(ctx, p)
}

// Near the deadline, the two steps of an action do not share one window: a
// registration delete that succeeds at the last moment of its step still
// leaves the pod ObjectRoom, and no write runs past the deadline less
// ReportReserve (a Lambda is killed at its deadline; a write cut before it
// is reported, and the next sweep finishes it). The sweep's deadline, not
// ActionTimeout, bounds each step here, and each step's window is read
// from its context's deadline: however late in its step the registration
// delete answered, the pod's window is the same.
func TestReapStepsNearTheDeadline(t *testing.T) {
	for _, podHangs := range []bool{false, true} {
		t.Run(fmt.Sprintf("pod delete hangs=%v", podHangs), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			deadline, _ := ctx.Deadline()
			b := &budgetSeer{recorder: &recorder{}, podHangs: podHangs}
			o := opts()
			o.Spare = time.Second
			o.ActionTimeout = time.Hour
			outs := New(b, b, o).Reap(ctx, 10, []reconcile.Candidate{cand(fleet.Zombie, "z", 1)})
			require.Len(t, outs, 1)
			assert.Equal(t, fleet.Deleted, outs[0].Registration, "the registration went")
			assert.Equal(t, deadline.Add(-ReportReserve-ObjectRoom), b.deadlines["gh:1"],
				"the registration's step ended ObjectRoom before the last moment: %v", b.deadlines)
			assert.Equal(t, deadline.Add(-ReportReserve), b.deadlines["pod:z"],
				"the pod's write had ObjectRoom after the registration's step, and ended at the deadline less the reserve: %v", b.deadlines)
			if podHangs {
				assert.Equal(t, fleet.Failed, outs[0].Result)
			} else {
				assert.Equal(t, fleet.Deleted, outs[0].Result)
			}
		})
	}
}

// Waiting for a slot spends none of the next action's budget: with one
// slot, a pod delete that takes a while leaves the next registration
// delete its whole budget, begun once the slot was free, not the rest of
// one begun before. The budget is read from the registration delete's
// context's deadline against when the pod delete ended; the pod delete's
// time only widens the gap a budget begun too early would show.
func TestReapSlotWaitSpendsNoBudget(t *testing.T) {
	slowPods := &slowPodDeletes{recorder: &recorder{}, took: 20 * time.Millisecond, done: map[string]time.Time{}}
	b := &budgetSeer{recorder: slowPods.recorder}
	o := opts()
	o.Concurrency = 1
	o.ActionTimeout = time.Minute
	outs := New(b, slowPods, o).Reap(context.Background(), 10, []reconcile.Candidate{cand(fleet.Zombie, "a", 1), cand(fleet.Zombie, "b", 2)})
	assert.Equal(t, map[string]fleet.Result{"a": fleet.Deleted, "b": fleet.Deleted}, results(outs))
	require.Contains(t, b.deadlines, "gh:2")
	require.Contains(t, slowPods.done, "a")
	assert.False(t, b.deadlines["gh:2"].Before(slowPods.done["a"].Add(o.ActionTimeout)),
		"b's registration delete had its whole budget from when a's pod delete gave up the slot: %v, a's pod done %v", b.deadlines, slowPods.done["a"])
}

// slowPodDeletes takes a while to delete a pod, and notes when each delete
// ended.
type slowPodDeletes struct {
	*recorder
	took time.Duration
	mu   sync.Mutex
	done map[string]time.Time
}

func (s *slowPodDeletes) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	time.Sleep(s.took)
	res, err := s.recorder.DeletePod(ctx, p)
	s.mu.Lock()
	s.done[p.Name] = time.Now()
	s.mu.Unlock()
	return res, err
}

// An action needs the report's reserve, its object's room and some time for
// GitHub: whatever Spare says, none starts closer than minLeft to the
// deadline.
func TestReapNoActionStartsInsideMinLeft(t *testing.T) {
	rec := &recorder{}
	o := opts()
	o.Spare = 0
	ctx, cancel := context.WithTimeout(context.Background(), minLeft-500*time.Millisecond)
	defer cancel()
	outs := New(rec, rec, o).Reap(ctx, 10, []reconcile.Candidate{cand(fleet.Zombie, "z", 1)})
	assert.Equal(t, map[string]fleet.Result{"z": fleet.NotReached}, results(outs))
	assert.Empty(t, rec.calls)
}

// flipCheck answers the pod's pre-flight as allowed, and the check right
// before its owner's delete as the pod's answer then: ARC replaced or
// removed it while the registration was deleted.
type flipCheck struct {
	*recorder
	then   fleet.Result
	checks int
}

func (f *flipCheck) DryRun() fleet.Writes { return flipDry{dryRecorder{f.recorder}, f} }

type flipDry struct {
	dryRecorder
	f *flipCheck
}

func (d flipDry) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	d.f.checks++
	if d.f.checks > 1 {
		d.f.log("check-pod:" + p.Name)
		return d.f.then, nil
	}
	return d.dryRecorder.DeletePod(ctx, p)
}

// An ARC owner that was not deleted is not reported
// deleted, and its mark is not cleared (skipped-changed keeps it).
func TestReapOwnerLeftAloneIsNotReportedDeleted(t *testing.T) {
	for _, then := range []fleet.Result{fleet.AlreadyGone, fleet.Changed} {
		t.Run(string(then), func(t *testing.T) {
			f := &flipCheck{recorder: &recorder{}, then: then}
			c := cand(fleet.Zombie, "set-runner-a", 7)
			c.Pod.Owner = &fleet.Owner{APIVersion: fleet.LegacyRunnerAPIVersion, Kind: fleet.LegacyRunnerKind, Name: "set-runner-a", UID: "owner-a"}
			outs := New(f, f, opts()).Reap(context.Background(), 10, []reconcile.Candidate{c})
			require.Len(t, outs, 1)
			assert.Equal(t, fleet.SkippedChanged, outs[0].Result)
			assert.Equal(t, fleet.Deleted, outs[0].Registration, "the registration did go")
			assert.Empty(t, outs[0].ObjectResult, "nothing was written to the owner")
			for _, call := range f.writes() {
				assert.False(t, strings.HasPrefix(call, "owner:") || strings.HasPrefix(call, "event:"), "no owner delete, no Event: %v", f.calls)
			}
		})
	}
}
