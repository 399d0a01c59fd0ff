//go:build !linux

package broker

import "time"

// threadCPU is unavailable here: script budgets are then wall-clock time.
func threadCPU() (time.Duration, bool) { return 0, false }
