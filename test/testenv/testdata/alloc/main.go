// Command alloc maps N MiB, has the kernel fault in every page of it at
// once (MAP_POPULATE) so that it is resident, and exits the moment that is
// done: a program whose peak comes in the last moments of its run, for
// the tests of testenv.RunBinary's memory figures.
//
// Usage: alloc N [IDLE]: IDLE (a duration, default 0) is how long it idles
// first, small, so that a sampler has seen it before the peak.
package main

import (
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		os.Exit(2)
	}
	if len(os.Args) > 2 {
		idle, err := time.ParseDuration(os.Args[2])
		if err != nil {
			os.Exit(2)
		}
		time.Sleep(idle)
	}
	if n > 0 {
		_, err := syscall.Mmap(-1, 0, n<<20, syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_POPULATE)
		if err != nil {
			os.Exit(1)
		}
	}
	os.Exit(0)
}
