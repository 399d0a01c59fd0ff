//go:build linux

package sandbox

import (
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPU returns the CPU time the calling OS thread has used, and false where no such clock
// exists. A caller that measures its own work locks its goroutine to its thread between two
// readings (the budget does so for a run), so that the difference is its own CPU time, not the
// machine's wall clock.
func ThreadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
