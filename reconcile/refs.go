package reconcile

// refs indexes values by key without a slice for every key. Nearly every
// key of a fleet's indexes has one value (one pod to a runner name, one
// registration to a name), so one holds that first value and only a key
// with more keeps a slice, in many: at 100,000 pods a slice per key cost
// a 24-byte header in every map slot and an allocation for every pod.
type refs[K comparable, V any] struct {
	one  map[K]*V
	many map[K][]*V
}

func newRefs[K comparable, V any](size int) refs[K, V] {
	return refs[K, V]{one: make(map[K]*V, size)}
}

// add indexes v under k, after any value already there.
func (r *refs[K, V]) add(k K, v *V) {
	first, ok := r.one[k]
	if !ok {
		r.one[k] = v
		return
	}
	if r.many == nil {
		r.many = map[K][]*V{}
	}
	if _, ok := r.many[k]; !ok {
		r.many[k] = []*V{first}
	}
	r.many[k] = append(r.many[k], v)
}

// n is how many values k has; zero on a nil refs.
func (r refs[K, V]) n(k K) int {
	if vs, ok := r.many[k]; ok {
		return len(vs)
	}
	if _, ok := r.one[k]; ok {
		return 1
	}
	return 0
}

// first is k's first value, or nil.
func (r refs[K, V]) first(k K) *V { return r.one[k] }

// all is k's values in the order added. It allocates for a key of one
// value, so the hot paths ask n and first.
func (r refs[K, V]) all(k K) []*V {
	if vs, ok := r.many[k]; ok {
		return vs
	}
	if v, ok := r.one[k]; ok {
		return []*V{v}
	}
	return nil
}

// keys calls f with every key.
func (r refs[K, V]) keys(f func(K)) {
	for k := range r.one {
		f(k)
	}
}
