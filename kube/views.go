package kube

import (
	"strings"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// viewBlock is the number of pod views in one block of a views: 1,024
// views are 200 KB; and of owner references in one of its owner blocks.
const viewBlock = 1024

// textBlock is the size of a block of the views' strings. The first blocks
// of a list are smaller (from firstTextBlock, doubling), as are its first
// owner blocks (from firstOwnerBlock), so that a small fleet does not pay
// for room it never fills.
const (
	textBlock       = 32 << 10
	firstTextBlock  = 1 << 10
	firstOwnerBlock = 16
)

// views gathers a list's pod views in blocks that never move, and copies
// them once, complete, into one slice of their number.
//
// Gathered by append into one slice, the views were copied each time it
// grew (by a quarter, at this size) and once more to drop its spare room,
// and a collection that ran between a copy and the next found both copies
// live and let the heap grow to a quarter above the two. At 100,000
// runners that set the sweep's peak: 102 MB of heap at the end of the pod
// list, for 65 MB live after it (GODEBUG=gctrace=1).
//
// The strings a view keeps (name, UID, resourceVersion, runner name, its
// owner's UID) and its owner reference are copied into blocks of their own
// as well. Left where the pod's decoding put them, each was an object of
// its own, rounded up to its size class (a UID's 36 bytes to 48), among
// the decoding's garbage of the same class: the pages of that garbage
// stayed resident for the one string in them that lived on. A block is
// kept whole while any view's string is in it, which every view's is
// until the sweep ends; a truncated view's bytes stay in a block that
// kept views share (at most one block's worth).
type views struct {
	blocks [][]fleet.Pod
	n      int
	text   *strings.Builder
	owners []fleet.Owner
}

// pack is s in the views' text blocks. A strings.Builder only appends,
// and never past the room it was grown to here, so the bytes of a string
// it returned are never written again: a substring of it is a string
// like any other, however the builder goes on.
func (v *views) pack(s string) string {
	if s == "" || len(s) > textBlock/8 {
		return s
	}
	if v.text == nil || v.text.Cap()-v.text.Len() < len(s) {
		size := firstTextBlock
		if v.text != nil {
			size = min(2*v.text.Cap(), textBlock)
		}
		v.text = new(strings.Builder)
		v.text.Grow(max(size, len(s)))
	}
	at := v.text.Len()
	v.text.WriteString(s)
	return v.text.String()[at:]
}

// owner is o in the views' owner blocks, its strings packed (the name
// shared with the pod's where they are the same, as ARC names them).
func (v *views) owner(o *fleet.Owner, p *fleet.Pod) *fleet.Owner {
	if o == nil {
		return nil
	}
	if len(v.owners) == cap(v.owners) {
		v.owners = make([]fleet.Owner, 0, min(max(2*cap(v.owners), firstOwnerBlock), viewBlock))
	}
	c := *o
	if c.Name == p.Name {
		c.Name = p.Name
	} else {
		c.Name = v.pack(c.Name)
	}
	c.UID = v.pack(c.UID)
	v.owners = append(v.owners, c)
	return &v.owners[len(v.owners)-1]
}

// add keeps the view p, its strings and owner packed (see views).
func (v *views) add(p fleet.Pod) {
	sameRunner := p.RunnerName == p.Name
	p.Name = v.pack(p.Name)
	if sameRunner {
		p.RunnerName = p.Name
	} else {
		p.RunnerName = v.pack(p.RunnerName)
	}
	p.UID = v.pack(p.UID)
	p.ResourceVersion = v.pack(p.ResourceVersion)
	p.Owner = v.owner(p.Owner, &p)
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
		// No dropped view keeps its strings, nor its owner its own.
		for i := len(b) - drop; i < len(b); i++ {
			if b[i].Owner != nil {
				*b[i].Owner = fleet.Owner{}
			}
		}
		clear(b[len(b)-drop:])
		v.blocks[last] = b[:len(b)-drop]
		v.n -= drop
		if len(v.blocks[last]) == 0 {
			v.blocks = v.blocks[:last]
		}
	}
	// The views added next start blocks of their own: a block only
	// dropped views wrote to is let go of.
	v.text, v.owners = nil, nil
}

// all is the views in one slice of their length; v is left empty, its
// blocks let go of as they are copied.
func (v *views) all() []fleet.Pod {
	out := make([]fleet.Pod, 0, v.n)
	for i, b := range v.blocks {
		out = append(out, b...)
		v.blocks[i] = nil
	}
	v.blocks, v.n, v.text, v.owners = nil, 0, nil, nil
	return out
}
