package storage

import "github.com/cockroachdb/pebble/v2"

// Usage is an optional ability of a Store: an estimate of the bytes a queue group takes on disk.
// The Pebble DB has it; the in-memory twin does not.
type Usage interface {
	// GroupBytes estimates the on-disk bytes of a queue group's log (bodies included) and of
	// its applied bodies, from the store's file metadata: writes still in the memtable are not
	// counted until they are flushed.
	GroupBytes(queue string) (uint64, error)
}

var _ Usage = (*DB)(nil)

// GroupBytes implements Usage.
func (d *DB) GroupBytes(queue string) (uint64, error) {
	var total uint64
	for _, kind := range []byte{kindRaft, kindBody} {
		var n uint64
		err := d.Read(func(p *pebble.DB) (err error) {
			n, err = p.EstimateDiskUsage(groupPrefix(kind, queue), groupEnd(kind, queue))
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
