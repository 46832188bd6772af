package memlimit

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

func TestSoftLimit(t *testing.T) {
	for _, tc := range []struct {
		name            string
		limit, codeRoom int64
		want            int64
	}{
		{"16 MiB: the code takes more than there is; half for the heap", 16 * mib, CodeRoom, 8 * mib},
		{"64 MiB: the code's room comes off", 64 * mib, CodeRoom, 36 * mib},
		{"128 MiB: the code's room comes off", 128 * mib, CodeRoom, 100 * mib},
		{"256 MiB: the code's room comes off", 256 * mib, CodeRoom, 228 * mib},
		{"280 MiB: the two agree", 280 * mib, CodeRoom, 252 * mib},
		{"1 GiB: 90%", 1 << 30, CodeRoom, 966367641},
		{"a measured code room", 128 * mib, 50 * mib, 78 * mib},
		{"no code room: 90%", 100 * mib, 0, 90 * mib},
		{"a negative code room counts as none", 100 * mib, -mib, 90 * mib},
		{"a code room beyond the limit: half", 100 * mib, math.MaxInt64, 50 * mib},
		{"no limit", 0, CodeRoom, 0},
		{"a negative limit", -1, CodeRoom, 0},
		{"one byte: nothing to set", 1, CodeRoom, 0},
		{"the largest limit, without overflow", math.MaxInt64, CodeRoom, 8301034833169298226},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SoftLimit(tc.limit, tc.codeRoom)
			assert.Equal(t, tc.want, got, "%d MiB", got/mib)
			if tc.limit > 0 {
				assert.Less(t, got, tc.limit)
			}
		})
	}
}

// fakeRuntime records what Apply does to the runtime's soft limit.
type fakeRuntime struct {
	limit int64
	sets  []int64
}

func (r *fakeRuntime) set(l int64) int64 {
	prev := r.limit
	if l >= 0 {
		r.limit = l
		r.sets = append(r.sets, l)
	}
	return prev
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		lim      Limit
		codeRoom int64
		runtime  int64 // the runtime's soft limit before
		want     Decision
		wantSets []int64
	}{
		{
			name: "a cgroup's limit", lim: Limit{128 * mib, SourceCgroup}, codeRoom: CodeRoom, runtime: math.MaxInt64,
			want:     Decision{Limit{128 * mib, SourceCgroup}, 100 * mib, GoMemLimitFromLimit},
			wantSets: []int64{100 * mib},
		},
		{
			name: "a Lambda's limit", lim: Limit{1 << 30, SourceLambda}, codeRoom: CodeRoom, runtime: math.MaxInt64,
			want:     Decision{Limit{1 << 30, SourceLambda}, 966367641, GoMemLimitFromLimit},
			wantSets: []int64{966367641},
		},
		{
			name: "the operator's GOMEMLIMIT stands", vars: map[string]string{"GOMEMLIMIT": "200MiB"},
			lim: Limit{128 * mib, SourceCgroup}, codeRoom: CodeRoom, runtime: 200 * mib,
			want: Decision{Limit{128 * mib, SourceCgroup}, 200 * mib, GoMemLimitFromEnv},
		},
		{
			name: "GOMEMLIMIT=off stands too", vars: map[string]string{"GOMEMLIMIT": "off"},
			lim: Limit{128 * mib, SourceCgroup}, codeRoom: CodeRoom, runtime: math.MaxInt64,
			want: Decision{Limit{128 * mib, SourceCgroup}, math.MaxInt64, GoMemLimitFromEnv},
		},
		{
			name: "an empty GOMEMLIMIT is none, as the runtime reads it", vars: map[string]string{"GOMEMLIMIT": ""},
			lim: Limit{256 * mib, SourceCgroup}, codeRoom: CodeRoom, runtime: math.MaxInt64,
			want:     Decision{Limit{256 * mib, SourceCgroup}, 228 * mib, GoMemLimitFromLimit},
			wantSets: []int64{228 * mib},
		},
		{
			name: "no limit: the runtime's stands", lim: Limit{Source: SourceNone}, codeRoom: CodeRoom, runtime: math.MaxInt64,
			want: Decision{Limit{Source: SourceNone}, math.MaxInt64, GoMemLimitNone},
		},
		{
			name: "a limit too small for any soft limit", lim: Limit{1, SourceCgroup}, codeRoom: CodeRoom, runtime: math.MaxInt64,
			want: Decision{Limit{1, SourceCgroup}, math.MaxInt64, GoMemLimitNone},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{limit: tc.runtime}
			got := Host{LookupEnv: env(tc.vars), SetMemoryLimit: rt.set}.Apply(tc.lim, tc.codeRoom)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantSets, rt.sets)
		})
	}
}

func TestApplyWithoutRuntime(t *testing.T) {
	got := Host{}.Apply(Limit{128 * mib, SourceCgroup}, CodeRoom)
	assert.Equal(t, Decision{Limit{128 * mib, SourceCgroup}, 100 * mib, GoMemLimitFromLimit}, got)
}

func TestSetupMalformedLambda(t *testing.T) {
	rt := &fakeRuntime{limit: math.MaxInt64}
	h := Host{
		LookupEnv:      env(map[string]string{LambdaMemoryEnv: "lots"}),
		Cgroup:         cgroup(256*mib, nil),
		SetMemoryLimit: rt.set,
	}
	d, err := h.Setup(CodeRoom)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrLambdaMemory, "the caller refuses to start on it")
	assert.Contains(t, err.Error(), LambdaMemoryEnv)
	assert.Equal(t, Decision{Limit{Source: SourceNone}, math.MaxInt64, GoMemLimitNone}, d)
	assert.Empty(t, rt.sets, "nothing is set from a limit that could not be read")
}

// A cgroup that cannot be read is an error, but not ErrLambdaMemory: the
// caller warns and sweeps without a known limit.
func TestSetupUnreadableCgroup(t *testing.T) {
	rt := &fakeRuntime{limit: math.MaxInt64}
	h := Host{LookupEnv: env(nil), Cgroup: cgroup(0, errors.New("no cgroup2 mount found")), SetMemoryLimit: rt.set}
	d, err := h.Setup(CodeRoom)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrLambdaMemory)
	assert.Equal(t, SourceNone, d.Limit.Source)
	assert.Empty(t, rt.sets)
}

func TestSetup(t *testing.T) {
	rt := &fakeRuntime{limit: math.MaxInt64}
	d, err := Host{LookupEnv: env(nil), Cgroup: cgroup(64*mib, nil), SetMemoryLimit: rt.set}.Setup(CodeRoom)
	require.NoError(t, err)
	assert.Equal(t, Decision{Limit{64 * mib, SourceCgroup}, 36 * mib, GoMemLimitFromLimit}, d)
	assert.Equal(t, []int64{36 * mib}, rt.sets)
}

// TestApplySetsTheRuntime is the one test that changes the process's own
// soft limit, and it puts it back.
func TestApplySetsTheRuntime(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	h := System()
	h.LookupEnv = env(nil) // whatever GOMEMLIMIT the test runs with
	d := h.Apply(Limit{256 * mib, SourceCgroup}, CodeRoom)
	assert.Equal(t, int64(228*mib), d.GoMemLimit)
	assert.Equal(t, int64(228*mib), debug.SetMemoryLimit(-1))
}

func TestDecisionAttrs(t *testing.T) {
	d := Decision{Limit{128 * mib, SourceCgroup}, 100 * mib, GoMemLimitFromLimit}
	assert.Equal(t, map[string]any{
		"memory_limit_bytes":  int64(128 * mib),
		"memory_limit_source": "cgroup",
		"gomemlimit_bytes":    int64(100 * mib),
		"gomemlimit_source":   "limit",
	}, attrMap(d.Attrs()))
}
