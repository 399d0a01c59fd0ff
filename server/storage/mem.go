package storage

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// Mem is the in-memory twin of DB for tests. Its durability model is Pebble's as the broker uses
// it: an append to a Raft log is durable when it returns (with the bodies its entries carry), and
// makes every body deletion before it durable too (one WAL, written in order); deletions after
// the last append are not yet durable and a Crash loses them. It can also be told to fail appends. It is safe for concurrent use and
// outlives the brokers opened on it, as a disk would.
type Mem struct {
	mu       sync.Mutex
	logs     map[string]raftstore.LogStableStore
	snaps    map[string]raft.SnapshotStore
	bodies   map[string]map[ID]Body
	applied  map[string]uint64
	undo     []func() // restores the body writes made since the last append, newest last
	failNext int
	delay    time.Duration
	crashed  bool
	hanging  chan struct{} // non-nil after HangAppends
	h        *health
}

// ErrCrashed is returned by every write to a crashed Mem until Restart.
var ErrCrashed = errors.New("storage: the store has crashed")

// ErrInjectedCommit is the failure FailCommits injects.
var ErrInjectedCommit = errors.New("storage: injected commit failure")

// NewMem returns an empty in-memory store.
func NewMem() *Mem {
	return &Mem{logs: map[string]raftstore.LogStableStore{}, snaps: map[string]raft.SnapshotStore{},
		bodies: map[string]map[ID]Body{}, applied: map[string]uint64{}, h: newHealth()}
}

// FailWrites makes the store refuse every write with a *WriteError caused by cause, as DB does
// after a write failed (a full disk), until ResumeWrites. A Raft group's term and vote writes
// wait meanwhile, as DB's do.
func (m *Mem) FailWrites(cause error) { m.h.fail(cause) }

// Stick makes the store stuck (Health.Stuck), as DB is after a commit panicked inside Pebble's
// commit pipeline: writes are refused for good.
func (m *Mem) Stick(cause error) { m.h.stick(cause) }

// HangAppends makes every later append to a log never return, as on a disk that no longer
// answers, or (with Stick) behind a commit pipeline a panic left locked. hanging receives one
// value for each append that hangs (it is not waited on when full: it holds 16).
func (m *Mem) HangAppends() (hanging <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hanging == nil {
		m.hanging = make(chan struct{}, 16)
	}
	return m.hanging
}

// ResumeWrites makes the store accept writes again, as DB does once the disk takes writes.
func (m *Mem) ResumeWrites() { m.h.recovered() }

// Health reports whether the store accepts writes.
func (m *Mem) Health() Health { return m.h.report() }

// refused returns the *WriteError while writes are refused, counting the refusal.
func (m *Mem) refused() error {
	err := m.h.err()
	if err != nil {
		m.h.failures.Add(1)
	}
	return err
}

var _ Store = (*Mem)(nil)

// FailCommits makes the next n appends to any group's log fail without storing anything.
func (m *Mem) FailCommits(n int) {
	m.mu.Lock()
	m.failNext = n
	m.mu.Unlock()
}

// DelayAppends makes every later append to a log take d (a slow disk), so that an entry stays
// unapplied for a while.
func (m *Mem) DelayAppends(d time.Duration) {
	m.mu.Lock()
	m.delay = d
	m.mu.Unlock()
}

// Crash cuts the power: the body writes made since the last log append are lost, and every
// write fails with ErrCrashed until Restart. Close the broker after Crash, then Restart and
// open a new one on the same Mem.
func (m *Mem) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.undo) - 1; i >= 0; i-- {
		m.undo[i]()
	}
	m.undo = nil
	m.crashed = true
}

// Restart accepts writes again after a Crash.
func (m *Mem) Restart() {
	m.mu.Lock()
	m.crashed = false
	m.mu.Unlock()
}

// LoseBody forgets the body of message id of queue, as damage to the disk would.
func (m *Mem) LoseBody(queue string, id ID) {
	m.mu.Lock()
	delete(m.bodies[queue], id)
	m.mu.Unlock()
}

const metaGroup = "\x00meta" // no queue name contains NUL

// MetaLog returns the meta group's stores.
func (m *Mem) MetaLog() (raftstore.LogStableStore, raft.SnapshotStore, error) {
	return m.group(metaGroup, nil)
}

// QueueLog returns a queue group's stores; its log keeps the bodies that bodies finds apart.
func (m *Mem) QueueLog(queue string, bodies EntryBodies) (raftstore.LogStableStore, raft.SnapshotStore, error) {
	if bodies == nil {
		return nil, nil, errNoEntryBodies
	}
	return m.group(queue, bodies)
}

func (m *Mem) group(name string, bodies EntryBodies) (raftstore.LogStableStore, raft.SnapshotStore, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.logs[name] == nil {
		m.logs[name] = raft.NewInmemStore()
		m.snaps[name] = raft.NewInmemSnapshotStore()
	}
	return &memLog{LogStableStore: m.logs[name], m: m, queue: name, bodies: bodies}, m.snaps[name], nil
}

// NewBatch starts body writes of a queue group.
func (m *Mem) NewBatch(queue string) BodyBatch { return &memBatch{m: m, queue: queue} }

// Applied returns a queue group's applied index.
func (m *Mem) Applied(queue string) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied[queue], nil
}

// ReadBody returns a copy of a body.
func (m *Mem) ReadBody(queue string, id ID) (Body, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bodies[queue][id]
	if !ok {
		return Body{}, ErrNotFound
	}
	return Body{Headers: maps.Clone(b.Headers), Payload: bytes.Clone(b.Payload)}, nil
}

// ReadBodiesLater copies the bodies of ids now; read hands them to fn.
func (m *Mem) ReadBodiesLater(queue string, ids []ID) func(fn func(i int, headers map[string]string, payload []byte)) error {
	found := make(map[int]Body, len(ids))
	for i, id := range ids {
		if b, err := m.ReadBody(queue, id); err == nil {
			found[i] = b
		}
	}
	return func(fn func(i int, headers map[string]string, payload []byte)) error {
		for i := range ids {
			if b, ok := found[i]; ok {
				fn(i, b.Headers, b.Payload)
			}
		}
		return nil
	}
}

// Queues lists the queue groups with a log.
func (m *Mem) Queues() ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.logs {
		if name != metaGroup {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DropQueue forgets a queue group.
func (m *Mem) DropQueue(queue string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return ErrCrashed
	}
	if err := m.refused(); err != nil {
		return err
	}
	delete(m.logs, queue)
	delete(m.snaps, queue)
	delete(m.bodies, queue)
	delete(m.applied, queue)
	m.undo = nil // the deletion is durable, and with it everything before
	return nil
}

// Close does nothing: the store outlives the broker.
func (m *Mem) Close() error { return nil }

// memLog is a group's log: appends fail when told to or after a crash, and make the body writes
// before them durable. A queue group's log keeps each body once, as DB's does: entries without
// their bodies, the bodies in the group's body map.
type memLog struct {
	raftstore.LogStableStore
	m      *Mem
	queue  string
	bodies EntryBodies // nil for the meta group's log
}

func (l *memLog) check() error {
	m := l.m
	if err := m.refused(); err != nil {
		return err
	}
	m.mu.Lock()
	d := m.delay
	m.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
		if err := m.refused(); err != nil {
			return err // the disk failed while the write was in flight
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.crashed:
		return ErrCrashed
	case m.failNext > 0:
		m.failNext--
		return ErrInjectedCommit
	}
	m.undo = nil
	return nil
}

func (l *memLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l *memLog) StoreLogs(logs []*raft.Log) error {
	l.m.mu.Lock()
	hanging := l.m.hanging
	l.m.mu.Unlock()
	if hanging != nil {
		select {
		case hanging <- struct{}{}:
		default:
		}
		select {} // HangAppends
	}
	if err := l.check(); err != nil {
		return err
	}
	if l.bodies == nil {
		return l.LogStableStore.StoreLogs(logs)
	}
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	split := make([]*raft.Log, len(logs))
	for i, lg := range logs {
		split[i] = lg
		if lg.Type != raft.LogCommand {
			continue
		}
		data, err := l.bodies.Split(lg.Data, func(id ID, h map[string]string, p []byte) {
			if m.bodies[l.queue] == nil {
				m.bodies[l.queue] = map[ID]Body{}
			}
			m.bodies[l.queue][id] = Body{Headers: maps.Clone(h), Payload: bytes.Clone(p)}
		})
		if err != nil {
			return err
		}
		c := *lg
		c.Data = data
		split[i] = &c
	}
	return l.LogStableStore.StoreLogs(split)
}

func (l *memLog) GetLog(index uint64, log *raft.Log) error {
	if err := l.LogStableStore.GetLog(index, log); err != nil || l.bodies == nil || log.Type != raft.LogCommand {
		return err
	}
	data, err := l.bodies.Join(log.Data, func(id ID) (map[string]string, []byte, bool) {
		b, err := l.m.ReadBody(l.queue, id)
		return b.Headers, b.Payload, err == nil
	})
	log.Data = data
	return err
}

func (l *memLog) DeleteRange(lo, hi uint64) error {
	if l.m.isCrashed() {
		return ErrCrashed
	}
	if err := l.m.refused(); err != nil {
		return err
	}
	return l.LogStableStore.DeleteRange(lo, hi)
}

func (l *memLog) Set(k, v []byte) error {
	if l.m.isCrashed() {
		return ErrCrashed
	}
	l.m.waitWritable()
	return l.LogStableStore.Set(k, v)
}

func (l *memLog) SetUint64(k []byte, v uint64) error {
	if l.m.isCrashed() {
		return ErrCrashed
	}
	l.m.waitWritable()
	return l.LogStableStore.SetUint64(k, v)
}

// waitWritable waits while writes are refused (DB.WriteStable).
func (m *Mem) waitWritable() {
	for {
		err, changed := m.h.state()
		if err == nil {
			return
		}
		<-changed
	}
}

func (m *Mem) isCrashed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed
}

type memWrite struct {
	id ID // deleted
}

type memBatch struct {
	m      *Mem
	queue  string
	writes []memWrite
}

func (b *memBatch) DeleteBody(id ID) { b.writes = append(b.writes, memWrite{id: id}) }

func (b *memBatch) Commit(applied uint64) error {
	m := b.m
	if err := m.refused(); err != nil {
		b.writes = nil
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	writes := b.writes
	b.writes = nil
	if m.crashed {
		return ErrCrashed
	}
	bodies := m.bodies[b.queue]
	if bodies == nil {
		bodies = map[ID]Body{}
		m.bodies[b.queue] = bodies
	}
	q, prevApplied := b.queue, m.applied[b.queue]
	for _, w := range writes {
		old, had := bodies[w.id]
		id := w.id
		m.undo = append(m.undo, func() {
			if had {
				m.bodies[q][id] = old
			} else {
				delete(m.bodies[q], id)
			}
		})
		delete(bodies, w.id)
	}
	m.undo = append(m.undo, func() { m.applied[q] = prevApplied })
	m.applied[b.queue] = applied
	return nil
}

func (b *memBatch) Close() { b.writes = nil }
