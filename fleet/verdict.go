package fleet

// Verdict names one kind of leak. The strings are part of the log contract.
type Verdict string

const (
	Zombie        Verdict = "zombie"
	Unregistered  Verdict = "unregistered"
	OrphanStamped Verdict = "orphan-stamped"
	Terminal      Verdict = "terminal"
	Ghost         Verdict = "ghost"
	// ARCFailed: an EphemeralRunner in phase Failed for too long. ARC
	// counts it against the scale set's maximum, so it blocks capacity.
	ARCFailed Verdict = "arc-failed"
	// ARCPodless: an EphemeralRunner with no pod for too long, not being
	// deleted.
	ARCPodless Verdict = "arc-podless"
	// ARCStuckDeleting: an EphemeralRunner whose deletion has waited too
	// long on a finalizer nobody can satisfy any more.
	ARCStuckDeleting Verdict = "arc-stuck-deleting"
	// NeverStarted: a runner pod whose runner container has not started
	// within the start deadline, counted from when the pod was scheduled
	// (from its creation while it waits for room). Such a
	// pod holds a scale set's slot while jobs queue behind it, and ARC
	// never fails its EphemeralRunner.
	NeverStarted Verdict = "never-started"
)

// Verdicts lists every verdict in the order the bound lets them act (as
// docs/design.md gives it): ARC's own leaks after the pod-level ones and
// before ghosts, which cost nothing but clutter. never-started follows
// unregistered: both remove a runner that never served, on the same proof
// (confirmation, and a look-up by name where no registration is listed),
// and a runner that runs unregistered holds a node's CPU, not only a slot.
var Verdicts = []Verdict{Terminal, OrphanStamped, Zombie, Unregistered, NeverStarted, ARCFailed, ARCPodless, ARCStuckDeleting, Ghost}

// Priority is the verdict's rank in docs/design.md's act order; lower acts first.
func (v Verdict) Priority() int {
	for i, w := range Verdicts {
		if v == w {
			return i
		}
	}
	return len(Verdicts)
}
