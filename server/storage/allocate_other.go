//go:build !linux

package storage

import "os"

// allocateFile gives f size bytes of real blocks by writing zeros: there is no fallocate outside
// Linux (the server is built and tested on Linux; this keeps the module building elsewhere).
func allocateFile(f *os.File, size int64) error { return writeZeros(f, size) }
