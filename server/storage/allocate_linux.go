package storage

import (
	"os"
	"syscall"
)

// allocateFile gives f size bytes of real blocks: fallocate, or zeros where the file system does
// not support it.
func allocateFile(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil || isNoSpace(err) {
		return err
	}
	return writeZeros(f, size)
}
