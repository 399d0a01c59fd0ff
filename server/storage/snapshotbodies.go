package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/filamq/fila/generated/store"
)

// SnapshotBodies is what a queue group's snapshots need of a store (DB and Mem have it): a view
// of the group's bodies as of the moment the snapshot's state is taken, read later while the
// group goes on, and the writing of a restored snapshot's bodies.
type SnapshotBodies interface {
	// ViewBodies takes a consistent view of a queue group's bodies now. It is cheap: the
	// bodies are read by the view's Each, on another goroutine if the caller likes.
	ViewBodies(queue string) (BodyView, error)
	// RestoreBodies starts writing the bodies of a snapshot restored into a queue group.
	RestoreBodies(queue string) BodyRestore
}

// BodyView is a consistent view of a queue group's bodies. Each may be called once; Close
// releases the view (also when Each was never called) and may be called more than once.
type BodyView interface {
	// Each calls fn for every body of the group in the view, in ascending ID order, and
	// returns fn's first error. Headers and payload are valid only during the call.
	Each(fn func(id ID, headers map[string]string, payload []byte) error) error
	Close()
}

// BodyRestore writes a restored snapshot's bodies into a queue group. It is not safe for
// concurrent use.
type BodyRestore interface {
	// Put stores a body (copied; it may be written before Commit).
	Put(id ID, headers map[string]string, payload []byte) error
	// Commit writes the bodies not written yet and the group's applied index, durably.
	Commit(applied uint64) error
}

var (
	_ SnapshotBodies = (*DB)(nil)
	_ SnapshotBodies = (*Mem)(nil)
)

// ViewBodies takes a Pebble snapshot of the store now. The view does not hold off a reopen of
// the database after a failure: a view whose database was replaced meanwhile fails to read.
func (d *DB) ViewBodies(queue string) (BodyView, error) {
	v := &dbView{d: d, queue: queue}
	err := d.Read(func(p *pebble.DB) error {
		v.p, v.snap = p, p.NewSnapshot()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

type dbView struct {
	d     *DB
	queue string
	p     *pebble.DB // the database the snapshot belongs to
	once  sync.Once
	snap  *pebble.Snapshot
}

// errReopened reports a view of a database that was reopened since the view was taken.
var errReopened = errors.New("storage: the store was reopened since the bodies' view was taken")

func (v *dbView) Each(fn func(id ID, headers map[string]string, payload []byte) error) error {
	lo := groupPrefix(kindBody, v.queue)
	hi := append(bytes.Clone(lo[:len(lo)-1]), 1)
	return v.d.Read(func(p *pebble.DB) error {
		if p != v.p {
			return errReopened
		}
		it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		err = eachBody(it, lo, v.queue, fn)
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

func eachBody(it *pebble.Iterator, lo []byte, queue string, fn func(id ID, headers map[string]string, payload []byte) error) error {
	var rec store.MessageRecord
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(lo)+len(ID{}) {
			return fmt.Errorf("%w: body key %x of %q", ErrCorrupt, k, queue)
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		id := ID(k[len(lo):])
		if err := decode(val, &rec); err != nil {
			return fmt.Errorf("body %x of %q: %w", id, queue, err)
		}
		if err := fn(id, rec.Headers, rec.Payload); err != nil {
			return err
		}
	}
	return it.Error()
}

func (v *dbView) Close() {
	v.once.Do(func() {
		_ = v.d.Read(func(p *pebble.DB) error {
			if p == v.p { // a reopen closed the old database, and its snapshots with it
				return v.snap.Close()
			}
			return nil
		})
	})
}

// RestoreBodies writes bodies in batches of about restoreBatchBytes without an fsync, and the
// last batch with the applied index with one.
func (d *DB) RestoreBodies(queue string) BodyRestore { return &dbRestore{d: d, queue: queue} }

const restoreBatchBytes = 4 << 20

type dbRestore struct {
	d     *DB
	queue string
	keys  [][]byte
	vals  [][]byte
	size  int
}

func (r *dbRestore) Put(id ID, headers map[string]string, payload []byte) error {
	rec := store.MessageRecord{Headers: headers, Payload: payload}
	val := rec.AppendTo(append(make([]byte, 0, 1+rec.Size()), byte(rec.Opcode())))
	r.keys, r.vals = append(r.keys, bodyKey(nil, r.queue, id)), append(r.vals, val)
	r.size += len(val)
	if r.size < restoreBatchBytes {
		return nil
	}
	return r.flush(nil, pebble.NoSync)
}

func (r *dbRestore) flush(applied []byte, opts *pebble.WriteOptions) error {
	err := r.d.Write(func(p *pebble.DB) error {
		b := p.NewBatch()
		defer b.Close()
		for i := range r.keys {
			_ = b.Set(r.keys[i], r.vals[i], nil)
		}
		if applied != nil {
			_ = b.Set(appliedKey(r.queue), applied, nil)
		}
		return b.Commit(opts)
	})
	clear(r.keys)
	clear(r.vals)
	r.keys, r.vals, r.size = r.keys[:0], r.vals[:0], 0
	if err != nil {
		return fmt.Errorf("storage: restoring the bodies of %q: %w", r.queue, err)
	}
	return nil
}

func (r *dbRestore) Commit(applied uint64) error {
	return r.flush(binary.BigEndian.AppendUint64(nil, applied), pebble.Sync)
}

// ViewBodies copies the group's bodies now.
func (m *Mem) ViewBodies(queue string) (BodyView, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return memView(maps.Clone(m.bodies[queue])), nil
}

type memView map[ID]Body

func (v memView) Each(fn func(id ID, headers map[string]string, payload []byte) error) error {
	ids := slices.SortedFunc(maps.Keys(v), func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		if err := fn(id, v[id].Headers, v[id].Payload); err != nil {
			return err
		}
	}
	return nil
}

func (memView) Close() {}

// RestoreBodies writes the bodies and the applied index at Commit.
func (m *Mem) RestoreBodies(queue string) BodyRestore {
	return &memRestore{m: m, queue: queue, bodies: map[ID]Body{}}
}

type memRestore struct {
	m      *Mem
	queue  string
	bodies map[ID]Body
}

func (r *memRestore) Put(id ID, headers map[string]string, payload []byte) error {
	r.bodies[id] = Body{Headers: maps.Clone(headers), Payload: bytes.Clone(payload)}
	return nil
}

func (r *memRestore) Commit(applied uint64) error {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return ErrCrashed
	}
	if err := m.refused(); err != nil {
		return err
	}
	if m.bodies[r.queue] == nil {
		m.bodies[r.queue] = map[ID]Body{}
	}
	maps.Copy(m.bodies[r.queue], r.bodies)
	m.applied[r.queue] = applied
	m.undo = nil // written durably, and everything before with it
	r.bodies = map[ID]Body{}
	return nil
}
