//go:build !linux

package sandbox

import "time"

// threadCPU is unavailable here: the budget is then wall-clock time.
func threadCPU() (time.Duration, bool) { return 0, false }
