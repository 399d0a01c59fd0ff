//go:build !unix

package offheap

// mapBytes maps no memory on this system: every buffer stays on the Go heap.
func mapBytes(int) ([]byte, bool) { return nil, false }

func unmapBytes([]byte) {}
