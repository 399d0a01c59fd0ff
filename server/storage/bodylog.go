package storage

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/raftstore"
)

// EntryBodies finds the message bodies in a queue group's log entries, for the group's log store
// to keep each body once (bodyLog). The entries' format is the state machine's, which implements
// it (server/queuegroup.Bodies); keeping the bodies is this package's. Its methods are
// deterministic and safe for concurrent use.
type EntryBodies interface {
	// Split returns entry without the headers and payloads of its messages and calls put with
	// each message's body, which aliases entry.
	Split(entry []byte, put func(id ID, headers map[string]string, payload []byte)) ([]byte, error)
	// Join returns a split entry with the bodies get finds put back; a message whose body get does
	// not find (acked since) stays without it.
	Join(entry []byte, get func(id ID) (headers map[string]string, payload []byte, ok bool)) ([]byte, error)
	// IDs appends to ids the IDs that Join asks get for, in the order it asks, so that a store
	// can read their bodies at once.
	IDs(entry []byte, ids []ID) ([]ID, error)
}

// errNoEntryBodies refuses a queue group's log store asked for without its EntryBodies.
var errNoEntryBodies = errors.New("storage: a queue group's log needs its EntryBodies")

// bodyLog is a queue group's Raft log store in Pebble that keeps each message body once: an
// entry is stored without its bodies, and the bodies under the group's body keys, in one batch
// (EntryBodies.Split); reading an entry back puts the bodies still stored into it. So a body
// costs one write, not one in the log and another when its entry is applied.
type bodyLog struct {
	*raftstore.Store
	db     *DB
	queue  string
	bodies EntryBodies
}

func (l *bodyLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l *bodyLog) StoreLogs(logs []*raft.Log) error {
	split := make([]*raft.Log, len(logs))
	type put struct {
		id      ID
		headers map[string]string
		payload []byte
	}
	var puts []put
	extra := 0 // the bodies' room in the batch
	for i, lg := range logs {
		split[i] = lg
		if lg.Type != raft.LogCommand {
			continue
		}
		data, err := l.bodies.Split(lg.Data, func(id ID, h map[string]string, p []byte) {
			puts = append(puts, put{id, h, p})
			// its key, opcode and record, and a bound on the batch's header for it (as raftstore counts)
			extra += len(l.queue) + 2 + len(id) + 1 + (&store.MessageRecord{Headers: h, Payload: p}).Size() + 16
		})
		if err != nil {
			return err
		}
		c := *lg
		c.Data = data
		split[i] = &c
	}
	return l.Store.StoreLogsWith(split, extra, func(b *pebble.Batch) {
		var key, val []byte
		for _, p := range puts {
			rec := store.MessageRecord{Headers: p.headers, Payload: p.payload}
			key = bodyKey(key[:0], l.queue, p.id)
			val = append(val[:0], byte(rec.Opcode()))
			val = rec.AppendTo(val)
			_ = b.Set(key, val, nil) // Set copies
		}
	})
}

// GetLogLight reads an entry without the bodies kept beside it (raftgroup.LightReader): a
// command's Data then lacks them.
func (l *bodyLog) GetLogLight(index uint64, log *raft.Log) error { return l.Store.GetLog(index, log) }

func (l *bodyLog) GetLog(index uint64, log *raft.Log) error {
	if err := l.Store.GetLog(index, log); err != nil {
		return err
	}
	if log.Type != raft.LogCommand {
		return nil
	}
	bodies, err := l.readBodies(log.Data)
	if err != nil {
		return fmt.Errorf("storage: log %d of queue %q: %w", index, l.queue, err)
	}
	data, err := l.bodies.Join(log.Data, func(id ID) (map[string]string, []byte, bool) {
		b, ok := bodies[id]
		return b.Headers, b.Payload, ok
	})
	if err != nil {
		return err
	}
	log.Data = data
	return nil
}

// readBodies reads the stored bodies of the messages a split entry enqueues with one iterator
// (their keys are neighbours: one seek, then steps), not a point read each: replaying a log of a
// million messages read each body with a Get of its own, which looked into every sstable that
// might hold it. A body that is not stored (acked since) is left out; one that is stored but
// cannot be read (damage) is an error.
func (l *bodyLog) readBodies(entry []byte) (map[ID]Body, error) {
	sorted, err := l.bodies.IDs(entry, nil)
	if err != nil || len(sorted) == 0 {
		return nil, err
	}
	slices.SortFunc(sorted, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	sorted = slices.Compact(sorted)
	bodies := make(map[ID]Body, len(sorted))
	err = l.db.ReadBodiesLater(l.queue, sorted)(func(i int, h map[string]string, p []byte) {
		bodies[sorted[i]] = Body{Headers: h, Payload: bytes.Clone(p)}
	})
	return bodies, err
}
