package memlimit

import (
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckThreshold(t *testing.T) {
	fleet := Fleet{Pods: 1000, Registrations: 1000}
	for _, tc := range []struct {
		name        string
		peak, limit int64
		want        bool
	}{
		{"79%", 79 * mib, 100 * mib, false},
		{"80% exactly is not past it", 80 * mib, 100 * mib, false},
		{"a byte past 80%", 80*mib + 1, 100 * mib, true},
		{"81%", 81 * mib, 100 * mib, true},
		{"over the limit", 120 * mib, 100 * mib, true},
		{"80% of 7 is 5.6: 5 is under", 5, 7, false},
		{"80% of 7 is 5.6: 6 is past", 6, 7, true},
		{"no limit", 1 << 40, 0, false},
		{"a negative limit", 1 << 40, -1, false},
		{"no peak read", 0, 100 * mib, false},
		{"a negative peak", -1, 100 * mib, false},
		{"the largest figures, without overflow", math.MaxInt64, math.MaxInt64, true},
		{"79% of the largest", math.MaxInt64 / 100 * 79, math.MaxInt64, false},
		{"81% of the largest", math.MaxInt64 / 100 * 81, math.MaxInt64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warn, _ := Check(tc.peak, tc.limit, fleet, Default())
			assert.Equal(t, tc.want, warn)
			warn, _ = Check(tc.peak, tc.limit, Fleet{Unobserved: true}, Default())
			assert.Equal(t, tc.want, warn, "the same threshold for a fleet not observed whole")
		})
	}
}

func TestCheckFits(t *testing.T) {
	// The arithmetic, on a formula of its own: Default is measured and moves.
	def := Formula{Base: 30 << 20, PerPod: 600, PerRegistration: 200}
	for _, tc := range []struct {
		name  string
		limit int64
		fleet Fleet
		f     Formula
		want  Fit
	}{
		{
			// budget 80 MiB, room 50 MiB past the base, 8,000,000 B per
			// fleet: k = 6.5536
			"a fleet in a limit it fits", 100 * mib, Fleet{Pods: 10000, Registrations: 10000}, def,
			Fit{Pods: 65536, Registrations: 65536, NeededMiB: 48},
		},
		{
			// budget floor(0.8*64 MiB) = 53687091, room 22229811, 80,000,000 B
			// per fleet: k = 0.27787...
			"a fleet past its limit", 64 * mib, Fleet{Pods: 100000, Registrations: 100000}, def,
			Fit{Pods: 27787, Registrations: 27787, NeededMiB: 133},
		},
		{
			"the observed proportion is kept", 100 * mib, Fleet{Pods: 1000, Registrations: 3000}, def,
			// per fleet 600,000 + 600,000: k = 52428800/1200000 = 43.69
			Fit{Pods: 43690, Registrations: 131072, NeededMiB: 39},
		},
		{
			"no pods", 100 * mib, Fleet{Pods: 0, Registrations: 1000}, def,
			Fit{Pods: 0, Registrations: 262144, NeededMiB: 38},
		},
		{
			"no registrations", 100 * mib, Fleet{Pods: 1000, Registrations: 0}, def,
			Fit{Pods: 87381, Registrations: 0, NeededMiB: 39},
		},
		{
			"an empty fleet", 100 * mib, Fleet{}, def,
			Fit{NeededMiB: 38},
		},
		{
			"negative counts are none", 100 * mib, Fleet{Pods: -5, Registrations: -7}, def,
			Fit{NeededMiB: 38},
		},
		{
			"a limit the base alone does not fit", 32 * mib, Fleet{Pods: 1000, Registrations: 1000}, def,
			Fit{NeededMiB: 39},
		},
		{
			"no limit: only what the fleet needs", 0, Fleet{Pods: 1000, Registrations: 1000}, def,
			Fit{NeededMiB: 39},
		},
		{
			"a formula that charges nothing per item fits any number", 100 * mib, Fleet{Pods: 1000, Registrations: 0}, Formula{Base: mib},
			Fit{Pods: math.MaxInt64, NeededMiB: 2},
		},
		{
			"a formula of nothing", 100 * mib, Fleet{Pods: 1000, Registrations: 1000}, Formula{},
			Fit{Pods: math.MaxInt64, Registrations: math.MaxInt64, NeededMiB: 0},
		},
		{
			"a negative formula counts as nothing", 100 * mib, Fleet{Pods: 1000, Registrations: 1000}, Formula{-1, -1, -1},
			Fit{Pods: math.MaxInt64, Registrations: math.MaxInt64, NeededMiB: 0},
		},
		{
			"the largest fleet: no overflow", math.MaxInt64, Fleet{Pods: math.MaxInt64, Registrations: math.MaxInt64}, def,
			// room/800, as pods = registrations
			Fit{Pods: (math.MaxInt64/100*80 + 7*80/100 - 30*mib) / 800, Registrations: (math.MaxInt64/100*80 + 7*80/100 - 30*mib) / 800, NeededMiB: math.MaxInt64 >> 20},
		},
		{
			"the largest formula: nothing fits", math.MaxInt64, Fleet{Pods: math.MaxInt64, Registrations: 1}, Formula{math.MaxInt64, math.MaxInt64, math.MaxInt64},
			Fit{NeededMiB: math.MaxInt64 >> 20},
		},
		{
			"a pod that costs nothing, beside registrations: saturates", math.MaxInt64, Fleet{Pods: math.MaxInt64, Registrations: 1}, Formula{0, 0, 1},
			Fit{Pods: math.MaxInt64, Registrations: math.MaxInt64/100*80 + 7*80/100, NeededMiB: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := Check(1, tc.limit, tc.fleet, tc.f)
			assert.Equal(t, tc.want, got)
			assertFits(t, tc.limit, tc.f, got)
		})
	}
}

// assertFits holds for every Fit: the fleet it names is within 80% of the
// limit by the formula, unless nothing fits or the formula sets no bound.
func assertFits(t *testing.T, limit int64, f Formula, fit Fit) {
	t.Helper()
	if limit <= 0 || fit.Pods == math.MaxInt64 || fit.Registrations == math.MaxInt64 || (fit.Pods == 0 && fit.Registrations == 0) {
		return
	}
	b := f.bytes(Fleet{Pods: fit.Pods, Registrations: fit.Registrations})
	budget := new(big.Int).Mul(big.NewInt(limit), big.NewInt(80))
	assert.LessOrEqual(t, new(big.Int).Mul(b, big.NewInt(100)).Cmp(budget), 0,
		"%+v is more than 80%% of %d by the formula", fit, limit)
}

// TestNeededTable is the README's table of limits: the limit the formula
// recommends for a fleet of one registration per runner pod. Each row must
// stand in the README as written here, so that the table an operator sizes
// the limit by cannot drift from the formula the binary warns by; when the
// formula changes, copy the table from this test's log.
func TestNeededTable(t *testing.T) {
	want := []struct {
		pods      int64
		neededMiB int64
	}{
		{1_000, 48},
		{10_000, 62},
		{30_000, 91},
		{50_000, 121},
		{100_000, 196},
		{200_000, 345},
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	f := Default()
	var table strings.Builder
	table.WriteString("| runner pods | registrations | memory limit |\n| ---: | ---: | ---: |\n")
	for _, w := range want {
		fleet := Fleet{Pods: w.pods, Registrations: w.pods}
		got := f.NeededMiB(fleet)
		assert.Equal(t, w.neededMiB, got, "%d pods", w.pods)
		row := fmt.Sprintf("| %s | %s | %d MiB |", thousands(w.pods), thousands(w.pods), got)
		table.WriteString(row + "\n")
		assert.True(t, strings.Contains(string(readme), "\n"+row+"\n"), "README.md's memory table lacks the row %q", row)

		// The limit recommended fits the fleet, and one MiB less would not.
		warn, fit := Check(f.peak(fleet), got<<20, fleet, f)
		assert.False(t, warn, "%d pods warn in the limit recommended for them", w.pods)
		assert.GreaterOrEqual(t, fit.Pods, w.pods)
		warn, fit = Check(f.peak(fleet), (got-1)<<20, fleet, f)
		assert.True(t, warn, "%d pods fit in a MiB less than recommended", w.pods)
		assert.Less(t, fit.Pods, w.pods)
	}
	t.Logf("formula %+v:\n%s", f, table.String())
}

// thousands writes n as the README does: digits in groups of three,
// separated by commas.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1_000: "1,000", 50_000: "50,000", 200_000: "200,000", 1_234_567: "1,234,567", -1_000: "-1,000"} {
		assert.Equal(t, want, thousands(n), "%d", n)
	}
}

func TestNeededMiB(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     Formula
		fleet Fleet
		want  int64
	}{
		{"exactly 80% of a whole MiB", Formula{Base: 4 * mib}, Fleet{}, 5},
		{"a byte more rounds up", Formula{Base: 4*mib + 1}, Fleet{}, 6},
		{"nothing needs nothing", Formula{}, Fleet{}, 0},
		{"one byte needs a MiB", Formula{Base: 1}, Fleet{}, 1},
		{"the largest: saturates where MiB still fit bytes", Formula{math.MaxInt64, math.MaxInt64, math.MaxInt64}, Fleet{Pods: math.MaxInt64, Registrations: math.MaxInt64}, math.MaxInt64 >> 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.f.NeededMiB(tc.fleet))
		})
	}
}

func TestBytes(t *testing.T) {
	f := Formula{Base: 30 * mib, PerPod: 600, PerRegistration: 200}
	assert.Equal(t, int64(30*mib+600*10+200*20), f.peak(Fleet{Pods: 10, Registrations: 20}))
	assert.Equal(t, int64(30*mib), f.peak(Fleet{Pods: -10, Registrations: -20}))
	assert.Equal(t, int64(math.MaxInt64), f.peak(Fleet{Pods: math.MaxInt64, Registrations: 0}))
}

func TestWarnAttrs(t *testing.T) {
	t.Run("a fleet past its limit", func(t *testing.T) {
		got, effect, _ := warned(t, 60*mib, Limit{64 * mib, SourceCgroup}, Fleet{Pods: 100000, Registrations: 100000})
		assert.Equal(t, map[string]any{
			"peak_rss_bytes":      int64(60 * mib),
			"memory_limit_bytes":  int64(64 * mib),
			"memory_limit_source": "cgroup",
			"fleet_observed":      true,
			"pods":                int64(100000),
			"registrations":       int64(100000),
			"fits_pods":           int64(11911),
			"fits_registrations":  int64(11911),
			"needed_limit_mib":    int64(196),
		}, got)
		assert.Equal(t, "the sweep's peak passed 80% of its memory limit: at this growth it will be OOM-killed, "+
			"with no report; a limit of 196 MiB fits this fleet, this limit fits about 11911 pods and 11911 registrations", effect)
	})
	t.Run("a fleet the formula fits: the memory went elsewhere", func(t *testing.T) {
		got, effect, _ := warned(t, 900*mib, Limit{1 << 30, SourceLambda}, Fleet{Pods: 10000, Registrations: 10000})
		assert.Equal(t, "lambda", got["memory_limit_source"])
		assert.Contains(t, effect, "this fleet needs only 62 MiB")
		assert.Contains(t, effect, "in a Lambda, an earlier invocation")
	})
	t.Run("a fleet not observed whole: no counts, no fit", func(t *testing.T) {
		// What a sweep holds when its pod list failed: nothing.
		got, effect, fit := warned(t, 60*mib, Limit{64 * mib, SourceCgroup}, Fleet{Unobserved: true})
		assert.Equal(t, Fit{}, fit)
		assert.Equal(t, map[string]any{
			"peak_rss_bytes":      int64(60 * mib),
			"memory_limit_bytes":  int64(64 * mib),
			"memory_limit_source": "cgroup",
			"fleet_observed":      false,
		}, got)
		assert.Contains(t, effect, "before it had observed the whole fleet")
		assert.NotContains(t, effect, "needs only", "a fleet of unknown size is not said to fit")
	})
}

// warned is the warning a sweep with this peak, limit and fleet logs: its
// attributes but the effect, and the effect. It fails the test if the
// sweep would not warn.
func warned(t *testing.T, peak int64, lim Limit, fleet Fleet) (map[string]any, string, Fit) {
	t.Helper()
	warn, fit := Check(peak, lim.Bytes, fleet, Default())
	require.True(t, warn, "the peak is the process's, observed or not")
	got := attrMap(WarnAttrs(peak, lim, fleet, fit))
	effect, _ := got["effect"].(string)
	delete(got, "effect")
	return got, effect, fit
}

func attrMap(attrs []slog.Attr) map[string]any {
	m := make(map[string]any, len(attrs))
	for _, a := range attrs {
		m[a.Key] = a.Value.Any()
	}
	return m
}

// FuzzCheck holds Check to its promises for any figures: no panic, no
// negative fit, and a fit within 80% of the limit.
func FuzzCheck(f *testing.F) {
	f.Add(int64(81*mib), int64(100*mib), int64(1000), int64(1000), int64(30*mib), int64(600), int64(200), false)
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), false)
	f.Add(int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), false)
	f.Add(int64(1), int64(1), int64(0), int64(0), int64(0), int64(0), int64(0), false)
	f.Add(int64(81*mib), int64(100*mib), int64(1000), int64(1000), int64(30*mib), int64(600), int64(200), true)
	f.Add(int64(7), int64(7), int64(3), int64(1), int64(1), int64(1), int64(0), false)
	f.Fuzz(func(t *testing.T, peak, limit, pods, regs, base, perPod, perReg int64, unobserved bool) {
		form := Formula{base, perPod, perReg}
		fleet := Fleet{Pods: pods, Registrations: regs, Unobserved: unobserved}
		warn, fit := Check(peak, limit, fleet, form)
		if limit <= 0 || peak <= 0 {
			assert.False(t, warn)
		}
		assert.GreaterOrEqual(t, fit.Pods, int64(0))
		assert.GreaterOrEqual(t, fit.Registrations, int64(0))
		assert.GreaterOrEqual(t, fit.NeededMiB, int64(0))
		assert.LessOrEqual(t, fit.NeededMiB, int64(math.MaxInt64>>20))
		assertFits(t, limit, form, fit)
		if unobserved {
			assert.Equal(t, Fit{}, fit, "no fit from a fleet not observed whole")
		}
		observed, _ := Check(peak, limit, Fleet{Pods: pods, Registrations: regs}, form)
		assert.Equal(t, observed, warn, "the same threshold, observed or not")
		_ = WarnAttrs(peak, Limit{limit, SourceCgroup}, fleet, fit)
	})
}

// peak is the fleet's peak by the formula, or math.MaxInt64 where that
// would not fit an int64. A negative count or cost counts as 0.
func (f Formula) peak(fl Fleet) int64 {
	return clamp(f.bytes(fl))
}
