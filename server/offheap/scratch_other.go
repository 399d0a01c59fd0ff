//go:build !linux

package offheap

import "errors"

// mapFile makes no scratch regions on this system: sweepable buffers are anonymous memory.
func (*Allocator) mapFile(string, int) ([]byte, error) {
	return nil, errors.New("scratch files are supported on Linux only")
}

func unmapFile([]byte) {}

func (*Allocator) checkReserves(string) error { return nil }

func (*Allocator) freeSpace(string) (int64, error) {
	return 0, errors.New("scratch files are supported on Linux only")
}

func readMaxMapCount() int64 { return defaultMaxMapCount }

func dropPages([]byte) {}

type residency struct{}

func openResidency() *residency                { return &residency{} }
func (*residency) close()                      {}
func (*residency) count([]byte) (int64, int64) { return 0, 0 }

// reserveFile and statFileSystem are never called here (no region is made); they are the tests'
// seams.
func reserveFile(int, int64) error { return errors.New("scratch files are supported on Linux only") }

func statFileSystem(string) (int64, int64, error) {
	return 0, 0, errors.New("scratch files are supported on Linux only")
}
