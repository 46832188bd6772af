package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// TestFindingsCarryTheJob: a finding names the job its runner is known to
// have held, from ARC's EphemeralRunner before the pod's own annotation,
// so that the choke point can ask GitHub about it and the report name it.
func TestFindingsCarryTheJob(t *testing.T) {
	arcJob := &fleet.Job{Owner: "acme", Repo: "api", RunID: 4242, RequestID: 9}
	podJob := &fleet.Job{Owner: "acme", Repo: "web", RunID: 7}
	owned := func(p *fleet.Pod) {
		p.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: p.Name, UID: "er-" + p.Name}
	}
	withJob := func(j *fleet.Job) func(*fleet.Pod) { return func(p *fleet.Pod) { p.Job = j } }
	for _, tc := range []struct {
		name string
		pod  fleet.Pod
		ers  []fleet.EphemeralRunner
		want *fleet.Job
	}{
		{"ARC's record", running("set-a-1", owned), []fleet.EphemeralRunner{er("set-a-1", func(e *fleet.EphemeralRunner) { e.Job = arcJob })}, arcJob},
		{"ARC's record before the pod's", running("set-a-1", owned, withJob(podJob)), []fleet.EphemeralRunner{er("set-a-1", func(e *fleet.EphemeralRunner) { e.Job = arcJob })}, arcJob},
		{"the pool's annotation", running("pool-1", withJob(podJob)), nil, podJob},
		{"a terminal pod's too", failed("pool-1", withJob(podJob)), nil, podJob},
		{"no job known", running("pool-1"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observe([]fleet.Pod{tc.pod}, reg(1, tc.pod.Name, false, false))
			obs.EphemeralRunners = tc.ers
			c := Classify(obs, policy(), nil)
			require.Len(t, c.Findings, 1)
			assert.Equal(t, tc.want, c.Findings[0].Job)
		})
	}
}
