package broker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Throttle counts across restarts (docs/throttles.md, "Restarts"). A throttle's buckets are the
// process's memory, lost when it ends, cleanly or not. So that no window ever holds more than N
// across a restart, the data directory holds a marker, written and synced before the first
// throttle of a process is declared (so before its first throttled delivery); a process that finds
// it at start treats every bucket as full until the throttle's largest window has passed since
// the start (throttle.Registry.Restarted). A data directory where no throttle was ever declared
// has no marker, and its throttles start empty.

// throttleMarkerFile is the marker's name in the data directory.
const throttleMarkerFile = "throttles-declared"

// throttleMarker writes the marker once per process.
type throttleMarker struct {
	mu   sync.Mutex
	path string // "" without a data directory: nothing to mark
	done bool
}

// openThrottles reads the marker at Open: found (or unreadable), the registry starts restarted.
func (b *Broker) openThrottles() {
	if b.opts.DataDir == "" {
		return
	}
	b.throttleMark.path = filepath.Join(b.opts.DataDir, throttleMarkerFile)
	_, err := os.Stat(b.throttleMark.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		b.log.Warn("cannot tell whether throttles were declared before this start: every throttle starts full for its largest window", "err", err)
	} else {
		b.log.Info("throttles were declared before this start: every throttle starts full for its largest window", "marker", b.throttleMark.path)
	}
	b.throttles.Restarted(b.started)
	b.throttleMark.done = err == nil
}

// markThrottles makes sure the marker is on disk before a throttle is declared.
func (b *Broker) markThrottles() *Error {
	m := &b.throttleMark
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done || m.path == "" {
		return nil
	}
	if err := writeSynced(m.path); err != nil {
		return errorf(CodeStorageError, "recording that throttles are in use: %v", err)
	}
	m.done = true
	return nil
}

// writeSynced creates the empty file path and syncs it and its directory.
func writeSynced(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
