package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sweepOf decodes JSON lines as a sweep's stdout, with a summary line
// added when none is given.
func sweepOf(t *testing.T, lines ...string) swept {
	t.Helper()
	out := strings.Join(lines, "\n")
	if !strings.Contains(out, `"msg":"sweep"`) {
		out += "\n" + `{"level":"INFO","msg":"sweep","protected_busy":0,"unscoped_pods":0}`
	}
	s, err := parseSweep(ran{Stdout: out})
	require.NoError(t, err)
	return s
}

// The demo says a runner's reason only where the sweeps bear it out: its
// action line (sweep, verdict, result), the summary's count of runners
// left alone for that reason, and what is left at the end. Every way
// those can disagree with the demo's expectation is a problem, named.
func TestExplanationsAreCheckedAgainstTheSweeps(t *testing.T) {
	zombie := member{name: "z", pod: true, reg: "offline", fate: fate{sweep: 2, verdict: "zombie", result: "deleted"}, why: "a zombie"}
	busy := member{name: "b", pod: true, reg: "online", busy: true, fate: fate{counted: "protected_busy"}, why: "busy"}
	deleted := `{"level":"INFO","msg":"action","pod":"z","runner_name":"z","verdict":"zombie","result":"deleted","evidence":"pod running; registration offline"}`
	protected := `{"level":"INFO","msg":"action","pod":"z","runner_name":"z","verdict":"zombie","result":"protected-job"}`
	busySummary := `{"level":"INFO","msg":"sweep","protected_busy":1,"unscoped_pods":0}`
	cases := map[string]struct {
		m      member
		sweeps [2][]string
		pods   map[string]bool
		regs   map[string]bool
		wrong  []string // what each problem says, in order
	}{
		"as expected": {m: zombie, sweeps: [2][]string{nil, {deleted}}},
		"another result": {m: zombie, sweeps: [2][]string{nil, {protected}}, pods: map[string]bool{"z": true}, regs: map[string]bool{"z": true},
			wrong: []string{"z: expected zombie -> deleted in sweep 2, but sweep 2 reported zombie -> protected-job", "its pod is still there", "its registration is still there"}},
		"a sweep early": {m: zombie, sweeps: [2][]string{{deleted}, nil},
			wrong: []string{"z: expected zombie -> deleted in sweep 2, but sweep 1 reported zombie -> deleted"}},
		"no action": {m: zombie, pods: map[string]bool{"z": true}, regs: map[string]bool{"z": true},
			wrong: []string{"no sweep reported an action on it", "its pod is still there", "its registration is still there"}},
		"reported but still there": {m: zombie, sweeps: [2][]string{nil, {deleted}}, pods: map[string]bool{"z": true},
			wrong: []string{"z: its pod is still there at the end"}},
		"left alone and counted": {m: busy, sweeps: [2][]string{{busySummary}, {busySummary}}, pods: map[string]bool{"b": true}, regs: map[string]bool{"b": true}},
		"left alone, not counted": {m: busy, sweeps: [2][]string{{busySummary}, nil}, pods: map[string]bool{"b": true}, regs: map[string]bool{"b": true},
			wrong: []string{"b: sweep 2's summary has protected_busy=0, where the demo counts 1"}},
		"acted on after all": {m: busy, sweeps: [2][]string{{busySummary, `{"msg":"action","pod":"b","verdict":"zombie","result":"deleted"}`}, {busySummary}},
			wrong: []string{"b: expected to be left alone, but sweep 1 reported zombie -> deleted", "its pod is gone", "its registration is gone"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := &explainer{fleet: []member{c.m}}
			for i := range c.sweeps {
				e.sweeps[i] = sweepOf(t, c.sweeps[i]...)
			}
			pods, regs := c.pods, c.regs
			if pods == nil {
				pods = map[string]bool{}
			}
			if regs == nil {
				regs = map[string]bool{}
			}
			e.explainMember(c.m, pods, regs)
			require.Len(t, e.problems, len(c.wrong), "%q", e.problems)
			for i, w := range c.wrong {
				assert.Contains(t, e.problems[i], w)
			}
		})
	}
}

// What the demo says of the mass-suspicion warning holds only if sweep 1
// wrote one and sweep 2 still deleted runners that sweep 1 marked.
func TestMassSuspicionIsExplainedFromTheWarning(t *testing.T) {
	warning := `{"level":"WARN","msg":"mass suspicion","scope":"org:acme","newly_suspect":5,"pods":8,"effect":"confirmation and bounds still apply"}`
	confirmed := `{"level":"INFO","msg":"action","pod":"z","verdict":"zombie","result":"deleted"}`
	terminal := `{"level":"INFO","msg":"action","pod":"t","verdict":"terminal","result":"deleted"}`
	cases := map[string]struct {
		sweep1, sweep2 []string
		wrong          string
	}{
		"warned, then acted":     {sweep1: []string{warning}, sweep2: []string{confirmed}},
		"no warning":             {sweep2: []string{confirmed}, wrong: "no mass-suspicion warning"},
		"warned, and then still": {sweep1: []string{warning}, sweep2: []string{terminal}, wrong: "deleted none of the runners marked in sweep 1"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := &explainer{sweeps: [2]swept{sweepOf(t, c.sweep1...), sweepOf(t, c.sweep2...)}, defaults: map[string]string{}}
			e.explainMassSuspicion()
			if c.wrong == "" {
				assert.Empty(t, e.problems)
				return
			}
			require.Len(t, e.problems, 1)
			assert.Contains(t, e.problems[0], c.wrong)
		})
	}
}

// A sweep that wrote no summary line did not finish as a sweep does.
func TestASweepWithoutASummaryIsAnError(t *testing.T) {
	_, err := parseSweep(ran{Code: 2, Stdout: "", Stderr: "invalid configuration"})
	assert.ErrorContains(t, err, "no summary line")
}

// Every runner of the demo's fleet has a reason, and one expectation.
func TestEveryRunnerHasAReason(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range demoFleet() {
		assert.False(t, seen[m.name], "%s is in the fleet once", m.name)
		seen[m.name] = true
		assert.NotEmpty(t, m.why, m.name)
		if m.fate.sweep == 0 {
			assert.Empty(t, m.fate.verdict+m.fate.result, "%s is left alone, with no verdict or result", m.name)
		} else {
			assert.NotEmpty(t, m.fate.verdict, m.name)
			assert.NotEmpty(t, m.fate.result, m.name)
		}
	}
}
