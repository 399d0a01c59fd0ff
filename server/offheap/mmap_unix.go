//go:build unix

package offheap

import "syscall"

// mapBytes maps n bytes of anonymous, private, zero-filled memory; false if the system refuses.
func mapBytes(n int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	return b, err == nil
}

// unmapBytes gives back memory from mapBytes.
func unmapBytes(b []byte) { _ = syscall.Munmap(b) }
