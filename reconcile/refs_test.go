package reconcile

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPositions(t *testing.T) {
	items := []string{"two", "one", "", "two", "three", "two"}
	key := func(i int32) string { return items[i] }
	keepAll := newPositions(len(items), nil, key, strings.Compare)
	noEmpty := newPositions(len(items), func(i int) bool { return items[i] != "" }, key, strings.Compare)
	for _, tc := range []struct {
		name string
		p    positions[string]
		key  string
		at   []int32
	}{
		{"one item", keepAll, "one", []int32{1}},
		{"several, in slice order", keepAll, "two", []int32{0, 3, 5}},
		{"the last key", keepAll, "two", []int32{0, 3, 5}},
		{"none", keepAll, "four", nil},
		{"below every key", keepAll, "a", nil},
		{"kept empty key", keepAll, "", []int32{2}},
		{"dropped by keep", noEmpty, "", nil},
		{"kept by keep", noEmpty, "three", []int32{4}},
		{"zero index", positions[string]{}, "one", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.at == nil {
				assert.Empty(t, tc.p.of(tc.key))
			} else {
				assert.Equal(t, tc.at, tc.p.of(tc.key))
			}
			assert.Equal(t, len(tc.at), tc.p.n(tc.key))
			last, ok := tc.p.last(tc.key)
			assert.Equal(t, len(tc.at) > 0, ok)
			if ok {
				assert.Equal(t, tc.at[len(tc.at)-1], last)
			}
		})
	}

	// runs visits each key once, in key order, with its items in slice
	// order; the zero index visits nothing.
	var keys []string
	var runs [][]int32
	keepAll.runs(func(k string, at []int32) {
		keys = append(keys, k)
		runs = append(runs, at)
	})
	assert.Equal(t, []string{"", "one", "three", "two"}, keys)
	assert.Equal(t, [][]int32{{2}, {1}, {4}, {0, 3, 5}}, runs)
	positions[string]{}.runs(func(string, []int32) { t.Fatal("the zero index has no runs") })

	// A run is capped: appending to it cannot write over the index.
	at := keepAll.of("one")
	_ = append(at, 99)
	assert.Equal(t, []int32{1}, keepAll.of("one"))
}

// TestPositionsScoped checks the scoped key the classifier uses: a name is
// found in its own scope only.
func TestPositionsScoped(t *testing.T) {
	type item struct{ scope, name string }
	items := []item{{"org:b", "r1"}, {"org:a", "r1"}, {"", "r1"}, {"org:a", "r2"}, {"org:a", "r1"}}
	p := newPositions(len(items), nil, func(i int32) scoped[string] { return scoped[string]{items[i].scope, items[i].name} }, compareScoped[string])
	assert.Equal(t, []int32{1, 4}, p.of(scoped[string]{"org:a", "r1"}))
	assert.Equal(t, []int32{0}, p.of(scoped[string]{"org:b", "r1"}))
	assert.Equal(t, []int32{2}, p.of(scoped[string]{"", "r1"}))
	assert.Empty(t, p.of(scoped[string]{"org:b", "r2"}))
}

// TestPositionsOneSharedKey indexes many items of one key, as a hostile
// fleet of one runner name would be: the run is found whole, and a count
// reads as many comparisons as a unique key's.
func TestPositionsOneSharedKey(t *testing.T) {
	const n = 10000
	compares := 0
	p := newPositions(n, nil, func(int32) string { return "same" }, func(a, b string) int {
		compares++
		return strings.Compare(a, b)
	})
	compares = 0
	require.Equal(t, n, p.n("same"))
	assert.Less(t, compares, 64, "counting a shared key is two binary searches")
}
