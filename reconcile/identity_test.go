package reconcile

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func failed(name string, mods ...func(*fleet.Pod)) fleet.Pod {
	return running(name, append([]func(*fleet.Pod){func(p *fleet.Pod) {
		p.Phase = "Failed"
		p.Runner = fleet.Container{Found: true, Terminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
	}}, mods...)...)
}

func inNamespace(ns string) func(*fleet.Pod) {
	return func(p *fleet.Pod) { p.Namespace, p.UID = ns, "uid-"+ns+"-"+p.Name }
}

func withRunnerName(name string) func(*fleet.Pod) { return func(p *fleet.Pod) { p.RunnerName = name } }

func withRunnerID(id int64) func(*fleet.Pod) { return func(p *fleet.Pod) { p.RunnerID = id } }

// finding is what the identity tests expect of one pod (or, for a ghost,
// of one registration): its verdict, and the id of the registration it
// would delete first (0: none).
type finding struct {
	verdict fleet.Verdict
	regID   int64
}

// findings keys each finding by namespace/pod, or by "reg:ID" for a ghost.
func findings(c Classification) map[string]finding {
	out := map[string]finding{}
	for _, f := range c.Findings {
		var id int64
		if f.Registration != nil {
			id = f.Registration.ID
		}
		key := ""
		if f.Pod != nil {
			key = f.Pod.Namespace + "/" + f.Pod.Name
		} else {
			key = "reg:" + strconv.FormatInt(f.Registration.ID, 10)
		}
		out[key] = finding{f.Verdict, id}
	}
	return out
}

// A registration is deleted only when it belongs to the pod
// being reaped. A runner name that more than one observed pod claims in a
// scope is ambiguous, and no registration action is taken on it; where the
// runner id is known, the id decides, not the name; a name listed more than
// once is protected if any of its registrations is busy or online, and is
// never deleted by.
func TestClassifyIdentity(t *testing.T) {
	cases := []struct {
		name      string
		pods      []fleet.Pod
		ers       []fleet.EphemeralRunner
		regs      []fleet.Registration
		marks     map[string]fleet.Mark
		want      map[string]finding
		protected int
		ambiguous []Ambiguity
	}{{
		name: "namesake across namespaces: the dead pod goes without the live pod's registration",
		pods: []fleet.Pod{failed("acme-x", inNamespace("team-a")), running("acme-x", inNamespace("team-b"))},
		regs: []fleet.Registration{reg(1, "acme-x", true, false)},
		want: map[string]finding{"team-a/acme-x": {fleet.Terminal, 0}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Pods: []string{"team-a/acme-x", "team-b/acme-x"},
			Reason: "runner name claimed by 2 observed pods; no registration is deleted by it"}},
	}, {
		name: "namesake across namespaces: the live pod gets no verdict from a registration that may be the other's",
		pods: []fleet.Pod{failed("acme-x", inNamespace("team-a")), running("acme-x", inNamespace("team-b"))},
		regs: []fleet.Registration{reg(1, "acme-x", false, false)},
		want: map[string]finding{"team-a/acme-x": {fleet.Terminal, 0}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Pods: []string{"team-a/acme-x", "team-b/acme-x"},
			Reason: "runner name claimed by 2 observed pods; no registration is deleted by it"}},
	}, {
		name: "namesake across namespaces: no unregistered verdict either",
		pods: []fleet.Pod{running("acme-x", inNamespace("team-a")), running("acme-x", inNamespace("team-b"))},
		want: map[string]finding{},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Pods: []string{"team-a/acme-x", "team-b/acme-x"},
			Reason: "runner name claimed by 2 observed pods; no registration is deleted by it"}},
	}, {
		name: "slot name reused through a label: two pods, one runner name",
		pods: []fleet.Pod{failed("pool-7-old", withRunnerName("slot-3")), running("pool-7-new", withRunnerName("slot-3"))},
		regs: []fleet.Registration{reg(1, "slot-3", true, false)},
		want: map[string]finding{"runners/pool-7-old": {fleet.Terminal, 0}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "slot-3", Pods: []string{"runners/pool-7-new", "runners/pool-7-old"},
			Reason: "runner name claimed by 2 observed pods; no registration is deleted by it"}},
	}, {
		name: "a pod being deleted still claims its name",
		pods: []fleet.Pod{failed("acme-x", inNamespace("team-a")), running("acme-x", inNamespace("team-b"), func(p *fleet.Pod) { p.Deleting = true })},
		regs: []fleet.Registration{reg(1, "acme-x", true, false)},
		want: map[string]finding{"team-a/acme-x": {fleet.Terminal, 0}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Pods: []string{"team-a/acme-x", "team-b/acme-x"},
			Reason: "runner name claimed by 2 observed pods; no registration is deleted by it"}},
	}, {
		name: "a pod whose scope is unknown claims the name in every scope",
		pods: []fleet.Pod{running("acme-x", inNamespace("team-a")), running("acme-x", inNamespace("elsewhere"), func(p *fleet.Pod) { p.ScopeKey = "" })},
		regs: []fleet.Registration{reg(1, "acme-x", false, false)},
		want: map[string]finding{},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Pods: []string{"elsewhere/acme-x", "team-a/acme-x"},
			Reason: "runner name claimed by 2 observed pods; no registration is deleted by it"}},
	}, {
		name: "a namesake in another scope is no namesake",
		pods: []fleet.Pod{failed("acme-x", inNamespace("team-a")), running("acme-x", inNamespace("team-b"), func(p *fleet.Pod) { p.ScopeKey = "org:other" })},
		regs: []fleet.Registration{reg(1, "acme-x", false, false)},
		want: map[string]finding{"team-a/acme-x": {fleet.Terminal, 1}},
	}, {
		name:      "an id naming a registration of another name ties the pod to nothing; the live one protects it",
		pods:      []fleet.Pod{running("acme-x", withRunnerID(42))},
		regs:      []fleet.Registration{reg(7, "acme-x", false, false), reg(42, "acme-x-renamed", true, false)},
		want:      map[string]finding{},
		protected: 1,
	}, {
		name: "a gone id with an online namesake falls back to the name: the runner registered again (a stale id); healthy, no zombie",
		pods: []fleet.Pod{running("acme-x", withRunnerID(42))},
		regs: []fleet.Registration{reg(7, "acme-x", true, false)},
		want: map[string]finding{},
	}, {
		name:      "a gone id with a busy namesake: protected",
		pods:      []fleet.Pod{running("acme-x", withRunnerID(42))},
		regs:      []fleet.Registration{reg(7, "acme-x", false, true)},
		want:      map[string]finding{},
		protected: 1,
	}, {
		name: "a gone id whose namesake is offline and idle falls back to the name: a zombie whose registration goes first (GitHub's 422 still protects it)",
		pods: []fleet.Pod{running("acme-x", withRunnerID(42))},
		regs: []fleet.Registration{reg(7, "acme-x", false, false)},
		want: map[string]finding{"runners/acme-x": {fleet.Zombie, 7}},
	}, {
		name: "a gone id whose name has two registrations: ambiguous, no verdict",
		pods: []fleet.Pod{running("acme-x", withRunnerID(42))},
		regs: []fleet.Registration{reg(7, "acme-x", false, false), reg(8, "acme-x", false, false)},
		want: map[string]finding{},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{7, 8}, Pods: []string{"runners/acme-x"},
			Reason: "2 registrations share the name; nothing is deleted by it"}},
	}, {
		name: "a terminal pod whose id cannot be checked against a name deletes no registration",
		pods: []fleet.Pod{failed("acme-x", withRunnerID(42), func(p *fleet.Pod) { p.RunnerName = "" })},
		regs: []fleet.Registration{reg(42, "other", true, false)},
		want: map[string]finding{"runners/acme-x": {fleet.Terminal, 0}},
	}, {
		name: "a running pod whose id cannot be checked against a name gets no verdict",
		pods: []fleet.Pod{running("acme-x", withRunnerID(42), func(p *fleet.Pod) { p.RunnerName = "" })},
		regs: []fleet.Registration{reg(42, "other", false, false)},
		want: map[string]finding{},
	}, {
		name: "a terminal pod whose id names a registration of another name deletes no registration, and the id shields none from being a ghost",
		pods: []fleet.Pod{failed("acme-x", withRunnerID(42))},
		regs: []fleet.Registration{reg(7, "acme-x", false, false), reg(42, "acme-x-renamed", false, false)},
		want: map[string]finding{"runners/acme-x": {fleet.Terminal, 0}, "reg:42": {fleet.Ghost, 42}},
	}, {
		name: "id beats name: among namesakes a terminal pod deletes the registration with its id",
		pods: []fleet.Pod{failed("acme-x", withRunnerID(42))},
		regs: []fleet.Registration{reg(7, "acme-x", false, false), reg(42, "acme-x", false, false)},
		want: map[string]finding{"runners/acme-x": {fleet.Terminal, 42}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{7, 42}, Pods: []string{"runners/acme-x"},
			Reason: "2 registrations share the name; nothing is deleted by it"}},
	}, {
		name: "id from the owning EphemeralRunner beats name",
		pods: []fleet.Pod{failed("set-a-runner-1", func(p *fleet.Pod) {
			p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: "set-a-runner-1", UID: "er-set-a-runner-1"}
		})},
		ers:  []fleet.EphemeralRunner{er("set-a-runner-1", func(e *fleet.EphemeralRunner) { e.RunnerID = 42 })},
		regs: []fleet.Registration{reg(7, "set-a-runner-1", true, true), reg(42, "set-a-runner-1", false, false)},
		want: map[string]finding{"runners/set-a-runner-1": {fleet.Terminal, 42}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "set-a-runner-1", Registrations: []int64{7, 42}, Pods: []string{"runners/set-a-runner-1"},
			Reason: "2 registrations share the name; nothing is deleted by it, and a pod claiming it is protected because one of them is busy or online"}},
	}, {
		name: "ids decide between namesakes in two namespaces",
		pods: []fleet.Pod{failed("acme-x", inNamespace("team-a"), withRunnerID(41)), running("acme-x", inNamespace("team-b"), withRunnerID(42))},
		regs: []fleet.Registration{reg(41, "acme-x", false, false), reg(42, "acme-x", true, false)},
		want: map[string]finding{"team-a/acme-x": {fleet.Terminal, 41}},
		ambiguous: []Ambiguity{
			{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{41, 42}, Pods: []string{"team-a/acme-x", "team-b/acme-x"},
				Reason: "2 registrations share the name; nothing is deleted by it, and a pod claiming it is protected because one of them is busy or online"},
			{ScopeKey: org, RunnerName: "acme-x", Pods: []string{"team-a/acme-x", "team-b/acme-x"},
				Reason: "runner name claimed by 2 observed pods; no registration is deleted by it"},
		},
	}, {
		name: "an id claimed by two pods is ambiguous",
		pods: []fleet.Pod{failed("acme-x", inNamespace("team-a"), withRunnerID(42)), running("acme-y", inNamespace("team-b"), withRunnerID(42))},
		regs: []fleet.Registration{reg(42, "acme-x", false, false)},
		want: map[string]finding{"team-a/acme-x": {fleet.Terminal, 0}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", RunnerID: 42, Pods: []string{"team-a/acme-x", "team-b/acme-y"},
			Reason: "runner id claimed by 2 observed pods; no registration is deleted by it"}},
	}, {
		name:      "duplicate names, one online and busy: protected",
		pods:      []fleet.Pod{running("acme-x")},
		regs:      []fleet.Registration{reg(1, "acme-x", true, true), reg(2, "acme-x", false, false)},
		want:      map[string]finding{},
		protected: 1,
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{1, 2}, Pods: []string{"runners/acme-x"},
			Reason: "2 registrations share the name; nothing is deleted by it, and a pod claiming it is protected because one of them is busy or online"}},
	}, {
		name:      "duplicate names, one busy but offline: protected",
		pods:      []fleet.Pod{running("acme-x")},
		regs:      []fleet.Registration{reg(1, "acme-x", false, false), reg(2, "acme-x", false, true)},
		want:      map[string]finding{},
		protected: 1,
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{1, 2}, Pods: []string{"runners/acme-x"},
			Reason: "2 registrations share the name; nothing is deleted by it, and a pod claiming it is protected because one of them is busy or online"}},
	}, {
		name:      "duplicate names, one online and idle: protected",
		pods:      []fleet.Pod{running("acme-x", func(p *fleet.Pod) { p.Stamped = true })},
		regs:      []fleet.Registration{reg(2, "acme-x", false, false), reg(1, "acme-x", true, false)},
		want:      map[string]finding{},
		protected: 1,
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{1, 2}, Pods: []string{"runners/acme-x"},
			Reason: "2 registrations share the name; nothing is deleted by it, and a pod claiming it is protected because one of them is busy or online"}},
	}, {
		name:  "duplicate names, all offline: no verdict, not protected",
		pods:  []fleet.Pod{running("acme-x")},
		regs:  []fleet.Registration{reg(1, "acme-x", false, false), reg(2, "acme-x", false, false)},
		marks: map[string]fleet.Mark{fleet.PodMarkKey("uid-acme-x"): {Verdict: fleet.Zombie, FirstSeen: t0.Add(-time.Hour)}},
		want:  map[string]finding{},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{1, 2}, Pods: []string{"runners/acme-x"},
			Reason: "2 registrations share the name; nothing is deleted by it"}},
	}, {
		name: "duplicate names: a terminal pod goes without a registration",
		pods: []fleet.Pod{failed("acme-x")},
		regs: []fleet.Registration{reg(1, "acme-x", true, true), reg(2, "acme-x", false, false)},
		want: map[string]finding{"runners/acme-x": {fleet.Terminal, 0}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-x", Registrations: []int64{1, 2}, Pods: []string{"runners/acme-x"},
			Reason: "2 registrations share the name; nothing is deleted by it, and a pod claiming it is protected because one of them is busy or online"}},
	}, {
		name: "duplicate names with no pod: never ghosts",
		regs: []fleet.Registration{reg(5, "acme-g", false, false), reg(6, "acme-g", false, false), reg(7, "acme-lone", false, false)},
		want: map[string]finding{"reg:7": {fleet.Ghost, 7}},
		ambiguous: []Ambiguity{{ScopeKey: org, RunnerName: "acme-g", Registrations: []int64{5, 6}, Pods: []string{},
			Reason: "2 registrations share the name; nothing is deleted by it"}},
	}, {
		name:      "a registration a pod names by id is no ghost",
		pods:      []fleet.Pod{running("acme-x", withRunnerID(42))},
		regs:      []fleet.Registration{reg(42, "acme-renamed", true, false)},
		want:      map[string]finding{},
		protected: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe(tc.pods, tc.regs...)
			obs.EphemeralRunners = tc.ers
			c := Classify(obs, policy(), tc.marks)
			assert.Equal(t, tc.want, findings(c))
			for _, f := range c.Findings {
				if f.Verdict == fleet.Terminal && f.Registration == nil {
					assert.Contains(t, f.Evidence, "no registration is deleted: runner")
				}
			}
			assert.Equal(t, tc.protected, c.Protected)
			for i := range c.Ambiguities {
				if c.Ambiguities[i].Pods == nil {
					c.Ambiguities[i].Pods = []string{}
				}
			}
			assert.Equal(t, tc.ambiguous, c.Ambiguities)
		})
	}
}

// A pod with no runner container is never a candidate, not
// even terminal, and does not widen the fractional bound; it still backs its
// name, so that its namesake registration is never taken for a ghost.
func TestClassifyNotRunner(t *testing.T) {
	notRunner := func(p *fleet.Pod) { p.HasRunner, p.Runner = false, fleet.Container{} }
	pods := []fleet.Pod{
		running("postgres-0", notRunner),
		failed("postgres-1", notRunner),
		running("acme-offline", notRunner),
		running("acme-stamped", notRunner, func(p *fleet.Pod) { p.Stamped = true }),
		running("acme-ghostly", notRunner),
		running("acme-real"),
	}
	c := Classify(observe(pods,
		reg(1, "acme-offline", false, false),
		reg(2, "acme-stamped", true, false),
		reg(3, "acme-ghostly", false, false),
	), policy(), nil)
	assert.Equal(t, map[string]fleet.Verdict{"acme-real": fleet.Unregistered}, verdicts(c))
	assert.Equal(t, 5, c.NotRunner)
	assert.Equal(t, 1, c.ManagedPods, "only runner pods are the base of the fractional bound")
}

// The registration deadline counts from when the runner
// started, and a Running pod is judged by its runner container's state.
func TestClassifyRunnerStart(t *testing.T) {
	cases := []struct {
		name     string
		pod      fleet.Pod
		regs     []fleet.Registration
		want     fleet.Verdict
		evidence []string
		exit     *Exit
	}{{
		name: "pending for an hour, started a minute ago: not past the deadline",
		pod:  running("acme-a", func(p *fleet.Pod) { p.StartedAt = fleet.StampOf(t0.Add(-time.Minute)) }),
	}, {
		name: "started eleven minutes ago: unregistered, with the time actually running",
		pod:  running("acme-a", func(p *fleet.Pod) { p.StartedAt = fleet.StampOf(t0.Add(-11 * time.Minute)) }),
		want: fleet.Unregistered, evidence: []string{"runner running for 11m0s", "pod created 1h0m0s ago", "past the 10m0s registration deadline"},
	}, {
		name: "exactly at the deadline from its start is not past it",
		pod:  running("acme-a", func(p *fleet.Pod) { p.StartedAt = fleet.StampOf(t0.Add(-10 * time.Minute)) }),
	}, {
		name: "CrashLoopBackOff: terminal, fingerprinted from lastState",
		pod: running("acme-a", func(p *fleet.Pod) {
			p.Runner = fleet.Container{Found: true, LastTerminated: &fleet.Termination{ExitCode: 137, Reason: "OOMKilled"}}
		}),
		regs: []fleet.Registration{reg(1, "acme-a", false, false)},
		want: fleet.Terminal, evidence: []string{"not running after a termination", "oom-host", "from lastState"},
		exit: &Exit{Code: 137, Reason: "OOMKilled", Class: ExitOOMHost, FromLastState: true},
	}, {
		name: "waiting after a crash, registration online: still terminal",
		pod: running("acme-a", func(p *fleet.Pod) {
			p.Runner = fleet.Container{Found: true, LastTerminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
		}),
		regs: []fleet.Registration{reg(1, "acme-a", true, false)},
		want: fleet.Terminal, evidence: []string{"crash", "from lastState"},
		exit: &Exit{Code: 1, Reason: "Error", Class: ExitCrash, FromLastState: true},
	}, {
		name: "restarted and running again: not terminal",
		pod: running("acme-a", func(p *fleet.Pod) {
			p.Runner = fleet.Container{Found: true, Running: true, LastTerminated: &fleet.Termination{ExitCode: 1, Reason: "Error"}}
		}),
		regs: []fleet.Registration{reg(1, "acme-a", true, false)},
	}, {
		name: "container still being created, past the deadline: no verdict yet",
		pod:  running("acme-a", func(p *fleet.Pod) { p.Runner = fleet.Container{Found: true} }),
	}, {
		name: "container still being created, registration offline: no zombie",
		pod:  running("acme-a", func(p *fleet.Pod) { p.Runner = fleet.Container{Found: true} }),
		regs: []fleet.Registration{reg(1, "acme-a", false, false)},
	}, {
		name: "container still being created, stamped: no orphan-stamped",
		pod:  running("acme-a", func(p *fleet.Pod) { p.Runner = fleet.Container{Found: true}; p.Stamped = true }),
		regs: []fleet.Registration{reg(1, "acme-a", true, false)},
	}, {
		name: "Running pod with no runner container status: no verdict",
		pod:  running("acme-a", func(p *fleet.Pod) { p.Runner = fleet.Container{} }),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Classify(observe([]fleet.Pod{tc.pod}, tc.regs...), policy(), nil)
			if tc.want == "" {
				assert.Empty(t, c.Findings)
				return
			}
			require.Len(t, c.Findings, 1)
			f := c.Findings[0]
			assert.Equal(t, tc.want, f.Verdict)
			for _, e := range tc.evidence {
				assert.Contains(t, f.Evidence, e)
			}
			assert.Equal(t, tc.exit, f.Exit)
		})
	}
}
