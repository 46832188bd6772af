package loops

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/state"
)

var now = time.Date(2026, 9, 20, 12, 0, 0, 0, time.UTC)

// entry is an action ago with the fingerprint: a terminal pod's for an
// exit class, else a never-started pod's waiting reason.
func entry(ago time.Duration, fp string) state.LoopEntry {
	v := fleet.Terminal
	if !Failure(string(v), fp) {
		v = fleet.NeverStarted
	}
	return state.LoopEntry{At: now.Add(-ago), Fingerprint: fp, Verdict: string(v)}
}

func candidate(v fleet.Verdict, pod *fleet.Pod, exit *reconcile.Exit) reconcile.Candidate {
	return reconcile.Candidate{Finding: reconcile.Finding{Verdict: v, Pod: pod, Exit: exit}}
}

func TestFingerprint(t *testing.T) {
	waiting := &fleet.Pod{StartWait: &fleet.StartWait{Reason: "ImagePullBackOff", Message: "back-off pulling image"}}
	cases := []struct {
		name string
		c    reconcile.Candidate
		want string
	}{
		{"a terminal pod by its exit class", candidate(fleet.Terminal, &fleet.Pod{}, &reconcile.Exit{Code: 7, Class: reconcile.ExitOutdated}), "outdated"},
		{"an OOM", candidate(fleet.Terminal, &fleet.Pod{}, &reconcile.Exit{Code: 137, Reason: "OOMKilled", Class: reconcile.ExitOOMHost}), "oom-host"},
		{"a terminal pod with no exit read is its verdict", candidate(fleet.Terminal, &fleet.Pod{}, nil), "terminal"},
		{"a never-started pod by its waiting reason", candidate(fleet.NeverStarted, waiting, nil), "ImagePullBackOff"},
		{"a never-started pod that says no reason is its verdict", candidate(fleet.NeverStarted, &fleet.Pod{}, nil), "never-started"},
		{"an unregistered runner is its verdict", candidate(fleet.Unregistered, &fleet.Pod{}, nil), "unregistered"},
		{"a zombie is its verdict", candidate(fleet.Zombie, &fleet.Pod{}, nil), "zombie"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Fingerprint(tc.c))
		})
	}
}

// TestFingerprintBounded: a waiting reason is the pod's text, and the
// fingerprint keeps at most MaxFingerprint bytes of it, cut at a rune.
func TestFingerprintBounded(t *testing.T) {
	cases := []struct {
		name, reason, want string
	}{
		{"a short reason whole", "ErrImagePull", "ErrImagePull"},
		{"exactly the bound", strings.Repeat("a", MaxFingerprint), strings.Repeat("a", MaxFingerprint)},
		{"a long reason cut", strings.Repeat("b", 10*MaxFingerprint), strings.Repeat("b", MaxFingerprint)},
		{"cut before a rune that would cross the bound", strings.Repeat("c", MaxFingerprint-1) + "é", strings.Repeat("c", MaxFingerprint-1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Fingerprint(candidate(fleet.NeverStarted, &fleet.Pod{StartWait: &fleet.StartWait{Reason: tc.reason}}, nil))
			assert.Equal(t, tc.want, got)
			assert.True(t, utf8.ValidString(got))
		})
	}
}

// TestOnlyFailuresCount: a pool that tidies its finished pods (exit 0,
// SIGTERM, no exit recorded) is no loop however many it deletes, nor is a
// group whose zombies GitHub's offline flag made; the failures a broken
// template causes are.
func TestOnlyFailuresCount(t *testing.T) {
	g := fleet.GroupOf("ReplicaSet", "ci", "pool-1")
	p := Policy{Threshold: 3, Window: 30 * time.Minute}
	exit := func(code int32, class reconcile.ExitClass) *reconcile.Exit {
		return &reconcile.Exit{Code: code, Class: class}
	}
	cases := []struct {
		name  string
		c     reconcile.Candidate
		loops bool
	}{
		{"exit 0", candidate(fleet.Terminal, &fleet.Pod{Group: g}, exit(0, reconcile.ExitClean)), false},
		{"SIGTERM", candidate(fleet.Terminal, &fleet.Pod{Group: g}, exit(143, reconcile.ExitSIGTERM)), false},
		{"no exit recorded", candidate(fleet.Terminal, &fleet.Pod{Group: g}, exit(0, reconcile.ExitUnknown)), false},
		{"no exit read", candidate(fleet.Terminal, &fleet.Pod{Group: g}, nil), false},
		{"zombie", candidate(fleet.Zombie, &fleet.Pod{Group: g}, nil), false},
		{"orphan-stamped", candidate(fleet.OrphanStamped, &fleet.Pod{Group: g}, nil), false},
		{"outdated", candidate(fleet.Terminal, &fleet.Pod{Group: g}, exit(7, reconcile.ExitOutdated)), true},
		{"crash", candidate(fleet.Terminal, &fleet.Pod{Group: g}, exit(1, reconcile.ExitCrash)), true},
		{"oom-host", candidate(fleet.Terminal, &fleet.Pod{Group: g}, exit(137, reconcile.ExitOOMHost)), true},
		{"sigkill", candidate(fleet.Terminal, &fleet.Pod{Group: g}, exit(137, reconcile.ExitSIGKILL)), true},
		{"never-started", candidate(fleet.NeverStarted, &fleet.Pod{Group: g, StartWait: &fleet.StartWait{Reason: "ImagePullBackOff"}}, nil), true},
		{"unregistered", candidate(fleet.Unregistered, &fleet.Pod{Group: g}, nil), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w map[string][]state.LoopEntry
			for i := range 5 {
				at := now.Add(time.Duration(i-5) * time.Minute)
				if a, ok := ActOf(tc.c, at); ok {
					w = Add(w, []Act{a}, at, p)
				}
			}
			assert.Equal(t, tc.loops, len(Detect(w, now, p)) == 1)
			assert.Equal(t, tc.loops, len(w) == 1, "only a failure is kept in the window")
		})
	}
	t.Run("a window an older release wrote with finished pods in it", func(t *testing.T) {
		old := map[string][]state.LoopEntry{g.String(): {
			{At: now.Add(-4 * time.Minute), Fingerprint: "clean", Verdict: "terminal"},
			{At: now.Add(-3 * time.Minute), Fingerprint: "clean", Verdict: "terminal"},
			{At: now.Add(-2 * time.Minute), Fingerprint: "zombie", Verdict: "zombie"},
			{At: now.Add(-2 * time.Minute), Fingerprint: "zombie", Verdict: "zombie"},
			{At: now.Add(-time.Minute), Fingerprint: "clean", Verdict: "terminal"},
			{At: now.Add(-time.Minute), Fingerprint: "zombie", Verdict: "zombie"},
		}}
		assert.Empty(t, Detect(old, now, p))
		assert.Nil(t, Prune(old, now, p))
	})
}

func TestActOf(t *testing.T) {
	g := fleet.GroupOf("ReplicaSet", "ci", "pool-1")
	act, ok := ActOf(candidate(fleet.Terminal, &fleet.Pod{Group: g}, &reconcile.Exit{Code: 7, Class: reconcile.ExitOutdated}), now)
	require.True(t, ok)
	assert.Equal(t, Act{Group: g, Entry: state.LoopEntry{At: now, Fingerprint: "outdated", Verdict: "terminal"}}, act)

	act, ok = ActOf(candidate(fleet.Terminal, &fleet.Pod{Group: g}, &reconcile.Exit{Code: 7, Class: reconcile.ExitOutdated}), now.Add(1234567*time.Microsecond))
	require.True(t, ok)
	assert.Equal(t, now.Add(time.Second), act.Entry.At, "kept to the second")

	_, ok = ActOf(candidate(fleet.Terminal, &fleet.Pod{}, nil), now)
	assert.False(t, ok, "a pod in no group counts in no loop")
	_, ok = ActOf(candidate(fleet.Ghost, nil, nil), now)
	assert.False(t, ok, "a ghost has no pod, so no group")
}

func TestPrune(t *testing.T) {
	p := Policy{Threshold: 3, Window: 30 * time.Minute}
	cases := []struct {
		name string
		in   map[string][]state.LoopEntry
		want map[string][]state.LoopEntry
	}{
		{"entries older than the window go, and a group left empty", map[string][]state.LoopEntry{
			"ReplicaSet ci/a": {entry(40*time.Minute, "crash"), entry(10*time.Minute, "crash")},
			"ReplicaSet ci/b": {entry(31*time.Minute, "crash")},
		}, map[string][]state.LoopEntry{"ReplicaSet ci/a": {entry(10*time.Minute, "crash")}}},
		{"the window's edge is out", map[string][]state.LoopEntry{
			"ReplicaSet ci/a": {entry(30*time.Minute, "crash"), entry(30*time.Minute-time.Second, "crash")},
		}, map[string][]state.LoopEntry{"ReplicaSet ci/a": {entry(30*time.Minute-time.Second, "crash")}}},
		{"an entry from the future beyond a minute goes; within it stays", map[string][]state.LoopEntry{
			"ReplicaSet ci/a": {entry(-2*time.Minute, "crash"), entry(-30*time.Second, "crash")},
		}, map[string][]state.LoopEntry{"ReplicaSet ci/a": {entry(-30*time.Second, "crash")}}},
		{"entries in time order, the newest twice the threshold kept", map[string][]state.LoopEntry{
			"ReplicaSet ci/a": {entry(time.Minute, "7"), entry(8*time.Minute, "1"), entry(7*time.Minute, "2"), entry(6*time.Minute, "3"),
				entry(5*time.Minute, "4"), entry(4*time.Minute, "5"), entry(3*time.Minute, "6"), entry(2*time.Minute, "6b")},
		}, map[string][]state.LoopEntry{"ReplicaSet ci/a": {entry(6*time.Minute, "3"), entry(5*time.Minute, "4"),
			entry(4*time.Minute, "5"), entry(3*time.Minute, "6"), entry(2*time.Minute, "6b"), entry(time.Minute, "7")}}},
		{"nothing left is nil", map[string][]state.LoopEntry{"ReplicaSet ci/a": {entry(time.Hour, "crash")}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Prune(tc.in, now, p))
		})
	}
}

// TestPruneCapsGroups: past MaxGroups, the groups acted on longest ago go.
func TestPruneCapsGroups(t *testing.T) {
	in := map[string][]state.LoopEntry{}
	for i := range MaxGroups + 10 {
		in[fmt.Sprintf("ReplicaSet ci/g-%03d", i)] = []state.LoopEntry{entry(time.Duration(i)*time.Second, "crash")}
	}
	got := Prune(in, now, Policy{Threshold: DefaultThreshold, Window: DefaultWindow})
	assert.Len(t, got, MaxGroups)
	assert.Contains(t, got, "ReplicaSet ci/g-000", "the newest is kept")
	assert.Contains(t, got, fmt.Sprintf("ReplicaSet ci/g-%03d", MaxGroups-1))
	assert.NotContains(t, got, fmt.Sprintf("ReplicaSet ci/g-%03d", MaxGroups), "the oldest go")
	assert.Len(t, in, MaxGroups+10, "the window given is not changed")
}

func TestAdd(t *testing.T) {
	p := Policy{Threshold: 2, Window: 10 * time.Minute}
	g := fleet.GroupOf(fleet.GroupScaleSet, "arc", "set")
	w := map[string][]state.LoopEntry{g.String(): {entry(20*time.Minute, "crash"), entry(5*time.Minute, "crash")}}
	got := Add(w, []Act{{Group: g, Entry: entry(0, "outdated")}, {Group: fleet.GroupOf("Job", "ci", "j"), Entry: entry(0, "crash")}}, now, p)
	assert.Equal(t, map[string][]state.LoopEntry{
		g.String(): {entry(5*time.Minute, "crash"), entry(0, "outdated")},
		"Job ci/j": {entry(0, "crash")},
	}, got)
	assert.Len(t, w[g.String()], 2, "the window given is not changed")
}

func TestDetect(t *testing.T) {
	p := Policy{Threshold: 3, Window: 30 * time.Minute}
	set := fleet.GroupOf(fleet.GroupScaleSet, "arc", "set")
	rs := fleet.GroupOf("ReplicaSet", "ci", "pool")
	cases := []struct {
		name string
		w    map[string][]state.LoopEntry
		want []Loop
	}{
		{"threshold actions with one fingerprint within the window are a loop", map[string][]state.LoopEntry{
			set.String(): {entry(20*time.Minute, "outdated"), entry(10*time.Minute, "outdated"), entry(time.Minute, "outdated")},
		}, []Loop{{Group: set, Count: 3, Fingerprint: "outdated", Verdict: "terminal", First: now.Add(-20 * time.Minute), Last: now.Add(-time.Minute),
			Fix: "runner version deprecated: update the runner image"}}},
		{"one fewer is none", map[string][]state.LoopEntry{
			set.String(): {entry(10*time.Minute, "outdated"), entry(time.Minute, "outdated")},
		}, nil},
		{"an action out of the window does not count", map[string][]state.LoopEntry{
			set.String(): {entry(40*time.Minute, "outdated"), entry(10*time.Minute, "outdated"), entry(time.Minute, "outdated")},
		}, nil},
		{"mixed fingerprints are no loop until one reaches the threshold", map[string][]state.LoopEntry{
			set.String(): {entry(5*time.Minute, "outdated"), entry(4*time.Minute, "crash"), entry(3*time.Minute, "oom-host"), entry(2*time.Minute, "outdated")},
		}, nil},
		{"the commonest fingerprint of a mixed group", map[string][]state.LoopEntry{
			rs.String(): {entry(5*time.Minute, "ImagePullBackOff"), entry(4*time.Minute, "crash"), entry(3*time.Minute, "ErrImagePull"),
				entry(2*time.Minute, "ImagePullBackOff"), entry(time.Minute, "ImagePullBackOff")},
		}, []Loop{{Group: rs, Count: 3, Fingerprint: "ImagePullBackOff", Verdict: "never-started", First: now.Add(-5 * time.Minute), Last: now.Add(-time.Minute),
			Fix: "the runner image cannot be pulled: check the image name and pull secret"}}},
		{"loops come most actions first", map[string][]state.LoopEntry{
			set.String(): {entry(3*time.Minute, "crash"), entry(2*time.Minute, "crash"), entry(time.Minute, "crash")},
			rs.String():  {entry(4*time.Minute, "CreateContainerConfigError"), entry(3*time.Minute, "CreateContainerConfigError"), entry(2*time.Minute, "CreateContainerConfigError"), entry(time.Minute, "CreateContainerConfigError")},
		}, []Loop{
			{Group: rs, Count: 4, Fingerprint: "CreateContainerConfigError", Verdict: "never-started", First: now.Add(-4 * time.Minute), Last: now.Add(-time.Minute), Fix: "a Secret or ConfigMap the template names is missing"},
			{Group: set, Count: 3, Fingerprint: "crash", Verdict: "terminal", First: now.Add(-3 * time.Minute), Last: now.Add(-time.Minute), Fix: Fix("crash")},
		}},
		{"a key that names no group is no loop", map[string][]state.LoopEntry{
			"not a group": {entry(3*time.Minute, "crash"), entry(2*time.Minute, "crash"), entry(time.Minute, "crash")},
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(tc.w, now, p)
			assert.Equal(t, tc.want, got)
			for _, l := range got {
				assert.True(t, Looping(got)[l.Group])
			}
		})
	}
	assert.Nil(t, Looping(nil))
}

func TestFixNamesTheFault(t *testing.T) {
	cases := map[string]string{
		"outdated":                   "runner version deprecated: update the runner image",
		"ImagePullBackOff":           "the runner image cannot be pulled: check the image name and pull secret",
		"ErrImagePull":               "the runner image cannot be pulled: check the image name and pull secret",
		"InvalidImageName":           "the runner image cannot be pulled: check the image name and pull secret",
		"CreateContainerConfigError": "a Secret or ConfigMap the template names is missing",
	}
	for fp, want := range cases {
		assert.Equal(t, want, Fix(fp), fp)
	}
	for _, fp := range []string{"crash", "oom-host", "sigkill", "clean", "CreateContainerError", "Unschedulable", "unregistered", "zombie", "something-new"} {
		assert.NotEmpty(t, Fix(fp), fp)
	}
	assert.NotEqual(t, Fix("crash"), Fix("oom-host"))
}

func TestTarget(t *testing.T) {
	rsOwner := &fleet.Owner{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "pool-7d9", UID: "uid-rs"}
	cases := []struct {
		name   string
		g      fleet.Group
		last   *fleet.Pod
		ns     string
		target fleet.Owner
		ok     bool
	}{
		{"a scale set: its AutoscalingRunnerSet", fleet.GroupOf(fleet.GroupScaleSet, "arc", "set"), &fleet.Pod{Namespace: "arc", Name: "set-abc"},
			"arc", fleet.Owner{APIVersion: "actions.github.com/v1alpha1", Kind: "AutoscalingRunnerSet", Name: "set"}, true},
		{"a RunnerDeployment", fleet.GroupOf(fleet.GroupRunnerDeployment, "ci", "rd"), nil,
			"ci", fleet.Owner{APIVersion: "actions.summerwind.dev/v1alpha1", Kind: "RunnerDeployment", Name: "rd"}, true},
		{"the controller the pod names, with its UID", fleet.GroupOf("ReplicaSet", "ci", "pool-7d9"), &fleet.Pod{Namespace: "ci", Name: "pool-7d9-x", Owner: rsOwner},
			"ci", *rsOwner, true},
		{"a Job without the pod", fleet.GroupOf("Job", "ci", "j"), nil,
			"ci", fleet.Owner{APIVersion: "batch/v1", Kind: "Job", Name: "j"}, true},
		{"a pool's own kind: the pod acted on last", fleet.GroupOf("RunnerPool", "ci", "p"), &fleet.Pod{Namespace: "ci", Name: "p-1", UID: "uid-p"},
			"ci", fleet.Owner{APIVersion: "v1", Kind: "Pod", Name: "p-1", UID: "uid-p"}, true},
		{"a generateName: the pod acted on last", fleet.GroupOf(fleet.GroupGenerateName, "ci", "runner-"), &fleet.Pod{Namespace: "ci", Name: "runner-q2", UID: "uid-q"},
			"ci", fleet.Owner{APIVersion: "v1", Kind: "Pod", Name: "runner-q2", UID: "uid-q"}, true},
		{"neither", fleet.GroupOf(fleet.GroupGenerateName, "ci", "runner-"), nil, "", fleet.Owner{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, o, ok := Target(tc.g, tc.last)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.ns, ns)
			assert.Equal(t, tc.target, o)
		})
	}
}
