package memlimit

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"syscall"
)

// PeakRSS is the process's peak resident memory so far, in bytes, which
// is most of what its cgroup is charged (the cgroup also charges it the
// page cache it reads through). It is the process's and not the sweep's:
// in a Lambda, where one process serves one invocation after another, it
// is the largest of every invocation since the cold start.
//
// It reads VmHWM from /proc/self/status: the larger of the kernel's
// high-water mark and the resident set now, since this program was
// exec'd. ru_maxrss is the fallback where /proc cannot be read, and only
// that: it is the high-water mark as the kernel last recorded it, which it
// does only as memory is given back, so a process still at its peak reads
// lower there (by 11 MiB in a test under load); and it starts at the peak
// of the parent the process was forked from, which Go forks in its own
// address space until the exec.
func PeakRSS() (int64, error) {
	// Linux counts VmHWM and ru_maxrss in KiB.
	kib := vmHWMKiB()
	if kib <= 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, fmt.Errorf("read the process's peak memory (getrusage): %w", err)
		}
		kib = ru.Maxrss
	}
	if kib > math.MaxInt64>>10 {
		return math.MaxInt64, nil
	}
	return max(kib, 0) << 10, nil
}

// vmHWMKiB is /proc/self/status's VmHWM in KiB, or 0 where it cannot be
// read.
func vmHWMKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}
