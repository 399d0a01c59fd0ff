package broker

import (
	"errors"
	"path/filepath"
)

// checkpointer is a store that can copy itself as of one moment (storage.DB.Checkpoint).
type checkpointer interface {
	Checkpoint(dir string) error
}

// ErrNoCheckpoint is what Checkpoint returns for a store that cannot copy itself (a test's
// in-memory store).
var ErrNoCheckpoint = errors.New("broker: this store cannot be checkpointed")

// Checkpoint writes a copy of the broker's durable state into dir, which must not exist: the
// store as of one moment (storage.DB.Checkpoint: every write committed before the call, so every
// request answered before it), and the throttles' file as a crash would leave it (present and
// empty when throttles were declared here: the node started on the copy starts every bucket full
// for its throttle's largest window). Requests go on meanwhile.
func (b *Broker) Checkpoint(dir string) error {
	cp, ok := b.db.(checkpointer)
	if !ok {
		return ErrNoCheckpoint
	}
	if err := cp.Checkpoint(dir); err != nil {
		return err
	}
	st := &b.throttleFile
	st.mu.Lock()
	present := st.present
	st.mu.Unlock()
	if !present {
		return nil
	}
	return writeSynced(filepath.Join(dir, throttleFile), nil)
}
