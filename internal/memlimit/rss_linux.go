package memlimit

import (
	"fmt"
	"math"
	"syscall"
)

// PeakRSS is the process's peak resident memory so far, in bytes: the
// kernel's ru_maxrss, the largest its resident set has been, which is most
// of what its cgroup is charged (the cgroup also charges it the page cache
// it reads through). It is the process's and not the
// sweep's: in a Lambda, where one process serves one invocation after
// another, it is the largest of every invocation since the cold start.
func PeakRSS() (int64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("read the process's peak memory (getrusage): %w", err)
	}
	// Linux counts ru_maxrss in KiB.
	if ru.Maxrss > math.MaxInt64>>10 {
		return math.MaxInt64, nil
	}
	return max(ru.Maxrss, 0) << 10, nil
}
