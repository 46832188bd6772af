package reconcile

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
)

// positions indexes the items of one slice by a key without a map: it holds
// the indexed items' positions, sorted by key and, among equal keys, by
// position, so that a key's items come in slice order. Classifying 100,000
// runners built eight maps of one entry a runner, pointer-valued: 31 MB,
// a third of what a sweep held while classifying (though not its peak,
// which the collector's last run before them set); the same indexes as
// positions are four bytes an entry. A lookup is a binary
// search, which costs a few comparisons more than a hash and nothing
// after.
type positions[K any] struct {
	pos []int32
	key func(int32) K
	cmp func(a, b K) int
}

// newPositions indexes the n items for which keep is true (nil keeps every
// one) by key. Positions are int32: the views of 2^31 runners would take
// over 400 GB, so no sweep holds that many, and the cap below is never
// reached (past it an item would go unindexed).
func newPositions[K any](n int, keep func(int) bool, key func(int32) K, compare func(a, b K) int) positions[K] {
	n = min(n, math.MaxInt32)
	size := n
	if keep != nil {
		size = 0
		for i := range n {
			if keep(i) {
				size++
			}
		}
	}
	pos := make([]int32, 0, size)
	for i := range n {
		if keep == nil || keep(i) {
			pos = append(pos, int32(i))
		}
	}
	slices.SortFunc(pos, func(a, b int32) int {
		if c := compare(key(a), key(b)); c != 0 {
			return c
		}
		return int(a - b)
	})
	return positions[K]{pos: pos, key: key, cmp: compare}
}

// of is the positions of the items whose key is k, in slice order: a
// slice of the index itself, which the caller must not change. Both ends
// are found by binary search, so that a key many items share (a hostile
// fleet of one runner name) costs no more to count than a unique one.
func (p positions[K]) of(k K) []int32 {
	n := len(p.pos)
	lo := sort.Search(n, func(i int) bool { return p.cmp(p.key(p.pos[i]), k) >= 0 })
	if lo == n || p.cmp(p.key(p.pos[lo]), k) != 0 {
		return nil
	}
	// Nearly every key has one item: the next position says so without
	// a second search.
	hi := lo + 1
	if hi < n && p.cmp(p.key(p.pos[hi]), k) == 0 {
		hi += sort.Search(n-hi, func(i int) bool { return p.cmp(p.key(p.pos[hi+i]), k) > 0 })
	}
	return p.pos[lo:hi:hi]
}

// n is how many items have the key k.
func (p positions[K]) n(k K) int { return len(p.of(k)) }

// last is the position of the last item with the key k, and false when
// none has it: what a map filled in slice order would hold for k.
func (p positions[K]) last(k K) (int32, bool) {
	at := p.of(k)
	if len(at) == 0 {
		return 0, false
	}
	return at[len(at)-1], true
}

// runs calls f with each key and its items' positions, in key order.
func (p positions[K]) runs(f func(k K, at []int32)) {
	for lo := 0; lo < len(p.pos); {
		k := p.key(p.pos[lo])
		hi := lo + 1
		for hi < len(p.pos) && p.cmp(p.key(p.pos[hi]), k) == 0 {
			hi++
		}
		f(k, p.pos[lo:hi:hi])
		lo = hi
	}
}

// scoped is a key within one scope: the indexes of pods and
// EphemeralRunners hold every scope's in one.
type scoped[K cmp.Ordered] struct {
	scope string
	k     K
}

func compareScoped[K cmp.Ordered](a, b scoped[K]) int {
	if c := strings.Compare(a.scope, b.scope); c != 0 {
		return c
	}
	// Not cmp.Compare, which tests each string against itself for a NaN
	// before it orders them: up to four comparisons where two do.
	switch {
	case a.k < b.k:
		return -1
	case a.k > b.k:
		return 1
	}
	return 0
}

// pointers are the items of s at the positions.
func pointers[V any](s []V, at []int32) []*V {
	out := make([]*V, len(at))
	for i, p := range at {
		out[i] = &s[p]
	}
	return out
}
