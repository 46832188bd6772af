package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRefs(t *testing.T) {
	a, b, c := new(int), new(int), new(int)
	r := newRefs[string, int](2)
	r.add("one", a)
	r.add("two", b)
	r.add("two", c)
	for _, tc := range []struct {
		key   string
		n     int
		first *int
		all   []*int
	}{
		{"one", 1, a, []*int{a}},
		{"two", 2, b, []*int{b, c}},
		{"none", 0, nil, nil},
	} {
		t.Run(tc.key, func(t *testing.T) {
			assert.Equal(t, tc.n, r.n(tc.key))
			assert.Same(t, tc.first, r.first(tc.key))
			assert.Equal(t, tc.all, r.all(tc.key))
		})
	}
	var keys []string
	r.keys(func(k string) { keys = append(keys, k) })
	assert.ElementsMatch(t, []string{"one", "two"}, keys)
	// The zero refs, as a scope without pods reads: nothing, no panic.
	var zero refs[string, int]
	assert.Zero(t, zero.n("one"))
	assert.Nil(t, zero.all("one"))
}
