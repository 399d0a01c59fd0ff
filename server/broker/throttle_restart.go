package broker

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Throttle counts across restarts (docs/throttles.md, "Restarts"). A throttle's buckets are the
// process's memory. The data directory holds a file, throttleFile, that says what the next
// process may trust:
//
//   - absent: no throttle was ever declared here; throttles start empty;
//   - empty: throttles were declared by a process that may have delivered under them and did not
//     stop cleanly (it is written, and synced, before a process's first declaration, so before
//     its first throttled delivery); the next process starts every bucket full for its
//     throttle's largest window (throttle.Registry.Restarted);
//   - a saved registry: the process stopped cleanly and wrote its buckets once its queues had
//     stopped (Close); the next process loads them (throttle.Registry.Load) and goes on counting
//     where it stopped. Before that process declares a throttle, the file is emptied again.

// throttleFile is the file's name in the data directory.
const throttleFile = "throttles"

// throttleState is what this process knows of the file.
type throttleState struct {
	mu      sync.Mutex
	path    string // "" without a data directory: nothing to keep
	present bool   // the file exists
	saved   bool   // it holds a saved registry (else it is empty)
}

// openThrottles reads the file at Open into the registry.
func (b *Broker) openThrottles() {
	if b.opts.DataDir == "" {
		return
	}
	st := &b.throttleFile
	st.path = filepath.Join(b.opts.DataDir, throttleFile)
	data, err := os.ReadFile(st.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		b.log.Warn("cannot read the throttles' state: every throttle starts full for its largest window", "err", err)
	case len(data) == 0:
		st.present = true
		b.log.Info("the previous process did not stop cleanly after declaring throttles: every throttle starts full for its largest window", "file", st.path)
	default:
		st.present, st.saved = true, true
		err := b.throttles.Load(bytes.NewReader(data), b.started)
		if err == nil {
			return
		}
		b.log.Warn("cannot load the throttles' state saved at the last stop: every throttle starts full for its largest window", "err", err)
	}
	b.throttles.Restarted(b.started)
}

// markThrottles makes sure the file is there, and empty, before a throttle is declared.
func (b *Broker) markThrottles() *Error {
	st := &b.throttleFile
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.path == "" || st.present && !st.saved {
		return nil
	}
	if err := writeSynced(st.path, nil); err != nil {
		return errorf(CodeStorageError, "recording that throttles are in use: %v", err)
	}
	st.present, st.saved = true, false
	return nil
}

// saveThrottles writes the registry into the file once the queues have stopped (Close). A failure
// leaves the file empty: the next process starts every bucket full.
func (b *Broker) saveThrottles() {
	st := &b.throttleFile
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.path == "" || !st.present {
		return
	}
	var buf bytes.Buffer
	err := b.throttles.Save(&buf)
	if err == nil {
		err = writeSynced(st.path, buf.Bytes())
	}
	if err != nil {
		b.log.Warn("cannot save the throttles' state: the next start counts every bucket full for its largest window", "err", err)
		return
	}
	st.saved = true
}

// writeSynced replaces the file path with data: written to a temporary file, synced, renamed
// over path, and the directory synced, so that a crash leaves the old file or the new one.
func writeSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
