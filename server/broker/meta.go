package broker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/queuegroup"
)

// metaFSM is the meta group's state machine: every queue definition (queues and their dead-letter
// queues), the runtime config, and the API keys with their ACLs. It applies every committed entry itself; the broker proposes a
// change, waits for it, then reads the result here.
type metaFSM struct {
	mu     sync.RWMutex
	queues map[string]store.QueueRecord
	config map[string]string
	keys   *auth.Store // API keys and ACLs (keys.go); it has its own lock
}

func newMetaFSM() *metaFSM {
	return &metaFSM{queues: map[string]store.QueueRecord{}, config: map[string]string{}, keys: auth.NewStore()}
}

// Apply applies one meta entry: a sequence of meta commands.
func (m *metaFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return queuegroup.Frames(l.Data, func(f queuelog.Frame) error {
		switch c := f.(type) {
		case *queuelog.PutQueue:
			var def store.QueueRecord
			if err := def.Decode(c.Definition); err != nil {
				return fmt.Errorf("meta: queue definition: %w", err)
			}
			m.queues[def.Name] = def
		case *queuelog.DropQueue:
			delete(m.queues, c.Name)
		case *queuelog.SetConfig:
			m.config[c.Key] = c.Value
		case *queuelog.PutAPIKey, *queuelog.RevokeAPIKey, *queuelog.SetACL:
			return m.applyKey(f)
		default:
			return fmt.Errorf("meta: %v is not a meta command", f.Opcode())
		}
		return nil
	})
}

// definitions returns every queue definition, by name.
func (m *metaFSM) definitions() []store.QueueRecord {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]store.QueueRecord, 0, len(m.queues))
	for _, d := range m.queues {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m *metaFSM) configCopy() map[string]string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]string, len(m.config))
	for k, v := range m.config {
		out[k] = v
	}
	return out
}

func putQueue(def *store.QueueRecord) queuelog.Frame {
	return &queuelog.PutQueue{Definition: def.AppendTo(nil)}
}

// Snapshot copies the state; Persist writes it as SnapshotQueue and SnapshotConfig frames.
func (m *metaFSM) Snapshot() (raft.FSMSnapshot, error) {
	return metaSnapshot{queues: m.definitions(), config: m.configCopy(), keys: m.keys.List()}, nil
}

// Restore replaces the state with a snapshot's.
func (m *metaFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	queues, config := map[string]store.QueueRecord{}, map[string]string{}
	var keys []auth.Record
	fr := wire.NewFrameReader(rc, queuelog.HeaderSize, 64<<20)
	for frames := uint64(0); ; frames++ {
		body, err := fr.Next()
		if err != nil {
			return fmt.Errorf("meta snapshot: %w", err)
		}
		f, err := queuelog.Decode(queuelog.Opcode(body[0]), body[1:])
		if err != nil {
			return fmt.Errorf("meta snapshot: %w", err)
		}
		switch c := f.(type) {
		case *queuelog.SnapshotQueue:
			var def store.QueueRecord
			if err := def.Decode(c.Definition); err != nil {
				return fmt.Errorf("meta snapshot: %w", err)
			}
			queues[def.Name] = def
		case *queuelog.SnapshotConfig:
			config[c.Key] = c.Value
		case *queuelog.SnapshotAPIKey:
			r, err := snapshotKey(c)
			if err != nil {
				return fmt.Errorf("meta snapshot: %w", err)
			}
			keys = append(keys, r)
		case *queuelog.SnapshotEnd:
			if c.Frames != frames {
				return errors.New("meta snapshot: incomplete")
			}
			m.mu.Lock()
			m.queues, m.config = queues, config
			m.keys.Replace(keys)
			m.mu.Unlock()
			return nil
		default:
			return fmt.Errorf("meta snapshot: unexpected %v", f.Opcode())
		}
	}
}

type metaSnapshot struct {
	queues []store.QueueRecord
	config map[string]string
	keys   []auth.Record
}

func (s metaSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	var buf []byte
	n := uint64(0)
	put := func(f queuelog.Frame) {
		buf = queuelog.AppendFrame(buf[:0], f)
		_, _ = w.Write(buf)
		n++
	}
	for i := range s.queues {
		put(&queuelog.SnapshotQueue{Definition: s.queues[i].AppendTo(nil)})
	}
	for k, v := range s.config {
		put(&queuelog.SnapshotConfig{Key: k, Value: v})
	}
	for i := range s.keys {
		put(keySnapshot(&s.keys[i]))
	}
	put(&queuelog.SnapshotEnd{Frames: n})
	if err := w.Flush(); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (metaSnapshot) Release() {}
