//go:build !linux

package engine

import "errors"

// mapFile makes no scratch regions on this system: sweepable buffers are anonymous memory.
func mapFile(string, int) ([]byte, error) {
	return nil, errors.New("scratch files are supported on Linux only")
}

func unmapFile([]byte) {}

func checkReserves(string) error { return nil }

func freeSpace(string) (int64, error) {
	return 0, errors.New("scratch files are supported on Linux only")
}

func readMaxMapCount() int64 { return defaultMaxMapCount }

func dropPages([]byte) {}

type residency struct{}

func openResidency() *residency                { return &residency{} }
func (*residency) close()                      {}
func (*residency) count([]byte) (int64, int64) { return 0, 0 }

// reserve is never called here (no region is made); it exists for the tests' seam.
var reserve = func(int, int64) error { return errors.New("scratch files are supported on Linux only") }
