package stream

import "github.com/cockroachdb/pebble/v2"

// Checkpoint writes a copy of the durable streams and their consumers, as of one moment, into
// dir, which must not exist (Pebble's checkpoint, with every append made before the call). It
// reports false, writing nothing, when the store keeps nothing on disk (no Options.Dir). The
// caller must not call it concurrently with Close.
func (s *Store) Checkpoint(dir string) (bool, error) {
	if s.disk == nil {
		return false, nil
	}
	select {
	case <-s.quit:
		return false, ErrClosed
	default:
	}
	return true, s.disk.Checkpoint(dir, pebble.WithFlushedWAL())
}
