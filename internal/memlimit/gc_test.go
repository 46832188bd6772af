package memlimit

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestApplyGC(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		want     GCDecision
		wantSets []int
	}{
		{"GOGC unset: the sweep's pace", nil, GCDecision{"10", GCFromDefault}, []int{10}},
		{"an empty GOGC is unset, as the runtime reads it", map[string]string{GOGC: ""}, GCDecision{"10", GCFromDefault}, []int{10}},
		{"the operator's GOGC stands", map[string]string{GOGC: "200"}, GCDecision{"200", GCFromEnv}, nil},
		{"GOGC=off stands too", map[string]string{GOGC: "off"}, GCDecision{"off", GCFromEnv}, nil},
		{"a GOGC the runtime cannot read is its default, and stands", map[string]string{GOGC: "fifty"}, GCDecision{"100", GCFromEnv}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sets []int
			set := func(p int) int { sets = append(sets, p); return 100 }
			got := Host{LookupEnv: env(tc.vars), SetGCPercent: set}.ApplyGCAt(GCPercent)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantSets, sets)
		})
	}
}

// The long-running mode's pace where GOGC is unset; the operator's GOGC
// stands there too.
func TestApplyGCAtServesPace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		want     GCDecision
		wantSets []int
	}{
		{"GOGC unset", nil, GCDecision{"100", GCFromDefault}, []int{ServeGCPercent}},
		{"the operator's GOGC stands", map[string]string{GOGC: "25"}, GCDecision{"25", GCFromEnv}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sets []int
			set := func(p int) int { sets = append(sets, p); return GCPercent }
			got := Host{LookupEnv: env(tc.vars), SetGCPercent: set}.ApplyGCAt(ServeGCPercent)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantSets, sets)
		})
	}
}

func TestApplyGCWithoutRuntime(t *testing.T) {
	assert.Equal(t, GCDecision{"10", GCFromDefault}, Host{}.ApplyGCAt(GCPercent))
}

// TestApplyGCSetsTheRuntime is the one test that changes the process's own
// pace, and it puts it back.
func TestApplyGCSetsTheRuntime(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	h := System()
	h.LookupEnv = env(nil) // whatever GOGC the test runs with
	h.ApplyGCAt(GCPercent)
	assert.Equal(t, GCPercent, debug.SetGCPercent(100))
}

func TestGCDecisionAttrs(t *testing.T) {
	assert.Equal(t, map[string]any{"gogc": "25", "gogc_source": "default"}, attrMap(GCDecision{"25", GCFromDefault}.Attrs()))
}
