package kube

import "github.com/runner-reaper/runner-reaper/fleet"

// viewBlock is the number of pod views in one block of a views: 1,024
// views are 200 KB.
const viewBlock = 1024

// views gathers a list's pod views in blocks that never move, and copies
// them once, complete, into one slice of their number.
//
// Gathered by append into one slice, the views were copied each time it
// grew (by a quarter, at this size) and once more to drop its spare room,
// and a collection that ran between a copy and the next found both copies
// live and let the heap grow to a quarter above the two. At 100,000
// runners that set the sweep's peak: 102 MB of heap at the end of the pod
// list, for 65 MB live after it (GODEBUG=gctrace=1).
type views struct {
	blocks [][]fleet.Pod
	n      int
}

func (v *views) add(p fleet.Pod) {
	if len(v.blocks) == 0 || len(v.blocks[len(v.blocks)-1]) == viewBlock {
		v.blocks = append(v.blocks, make([]fleet.Pod, 0, viewBlock))
	}
	last := len(v.blocks) - 1
	v.blocks[last] = append(v.blocks[last], p)
	v.n++
}

// len is the number of views gathered.
func (v *views) len() int { return v.n }

// truncate keeps the first n views: a watch-list that ended before it was
// complete gives back the views it gave, for its namespace's pages to
// replace.
func (v *views) truncate(n int) {
	for v.n > max(n, 0) {
		last := len(v.blocks) - 1
		b := v.blocks[last]
		drop := min(len(b), v.n-max(n, 0))
		clear(b[len(b)-drop:]) // no dropped view keeps its strings
		v.blocks[last] = b[:len(b)-drop]
		v.n -= drop
		if len(v.blocks[last]) == 0 {
			v.blocks = v.blocks[:last]
		}
	}
}

// all is the views in one slice of their length; v is left empty, its
// blocks let go of as they are copied.
func (v *views) all() []fleet.Pod {
	out := make([]fleet.Pod, 0, v.n)
	for i, b := range v.blocks {
		out = append(out, b...)
		v.blocks[i] = nil
	}
	v.blocks, v.n = nil, 0
	return out
}
