//go:build !linux

package sandbox

import "time"

// ThreadCPU is unavailable here: budgets are then wall-clock time.
func ThreadCPU() (time.Duration, bool) { return 0, false }
