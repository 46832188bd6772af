//go:build !linux

package memlimit

import (
	"errors"
	"fmt"
)

// PeakRSS is the process's peak resident memory, read on Linux only: the
// reaper ships for Linux, and elsewhere ru_maxrss has other units or none.
func PeakRSS() (int64, error) {
	return 0, fmt.Errorf("read the process's peak memory: %w", errors.ErrUnsupported)
}
