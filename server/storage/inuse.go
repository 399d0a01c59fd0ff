package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A data directory is used by one process at a time: Pebble holds a lock on its LOCK file (an
// fcntl lock, released by the kernel when the process ends, however it ends) while the store is
// open. A second server, or a check, started on the directory meanwhile is refused with an
// *InUseError rather than Pebble's bare "resource temporarily unavailable".

// lockName is the file Pebble locks in a store's directory.
const lockName = "LOCK"

// ErrInUse is what an *InUseError matches with errors.Is.
var ErrInUse = errors.New("storage: the data directory is in use")

// InUseError reports a data directory that another process has open.
type InUseError struct{ Dir string }

func (e *InUseError) Error() string {
	return fmt.Sprintf("another fila-server is using %s (it holds %s); stop it first, or give this one another data_dir",
		e.Dir, filepath.Join(e.Dir, lockName))
}

func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// CheckNotInUse returns an *InUseError when a process holds the lock of the store in dir, and
// nil when none does (or dir holds no store yet). It takes the lock and releases it at once: a
// process that takes it right after is found by its own open.
func CheckNotInUse(dir string) error {
	path := filepath.Join(dir, lockName)
	if _, err := os.Stat(path); err != nil {
		return nil // no store, or one never opened: Pebble's open reports what is wrong
	}
	l, err := vfs.Default.Lock(path)
	if err != nil {
		if isLockHeld(err) {
			return &InUseError{Dir: dir}
		}
		return nil
	}
	return l.Close()
}

// isLockHeld reports whether err is a failure to take a lock that someone else holds: fcntl's
// EAGAIN or EACCES (POSIX allows either), or Pebble's refusal of a lock this process holds. A
// file that cannot be opened (a *PathError: no permission) is not one.
func isLockHeld(err error) bool {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// inUse turns Pebble's failure to lock dir into an *InUseError; other errors pass unchanged.
func inUse(dir string, err error) error {
	if err != nil && isLockHeld(err) {
		return &InUseError{Dir: dir}
	}
	return err
}
