package queuegroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// A snapshot of a group is a stream of queuelog frames ([u32 length][u8 opcode][body]):
//
//	for each lane (queue, then dead-letter):
//	  SnapshotLane      configuration, message and key counts
//	  SnapshotMessage × messages, in enqueue order (state, attempts, lease; no body); runs of
//	                    plain ready messages as SnapshotRun frames, each counting its messages
//	  for each key (keys of the DRR round first, in round order):
//	    SnapshotKey     weight, deficit, in_round, ready count
//	    SnapshotReady … the key's ready FIFO, head first, in chunks of readyChunk IDs
//	SnapshotDeadLetter × why each message of the dead-letter lane is there, when known, by ID
//	SnapshotIdentity × every remembered deduplication identity
//	Fence             the fence of the last entry the snapshot includes
//	SnapshotEnd       the number of frames before it
//	SnapshotBodies    the log index the state is as of (WriteBodies)
//	SnapshotBody ×    the body of every stored message of either lane, in ID order
//	SnapshotBodiesEnd the number of bodies
//
// The frames up to SnapshotEnd are the state (WriteSnapshot, Restore); the bodies follow, so that
// the snapshot alone restores a replica that holds nothing of the group (raft's InstallSnapshot),
// while a node restoring its own snapshot reads the state and stops (SnapshotReader). A snapshot
// written before bodies were kept in snapshots ends at its SnapshotEnd.

const readyChunk = 4096

// maxSnapshotFrame bounds one snapshot frame: the largest is a SnapshotReady chunk, a SnapshotRun
// of readyChunk messages (about 100 KB and a key) or a message with a long last error.
const maxSnapshotFrame = 64 << 20

// WriteSnapshot writes the state to w in the format above.
func (s *State) WriteSnapshot(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	sw := snapshotWriter{w: bw}
	for l := LaneQueue; l <= LaneDeadLetter; l++ {
		s.writeLane(&sw, l)
	}
	s.writeWhy(&sw)
	idents := make([]Identity, 0, len(s.dedup.ids))
	for ident := range s.dedup.ids {
		idents = append(idents, ident)
	}
	slices.SortFunc(idents, func(a, b Identity) int { return bytes.Compare(a[:], b[:]) })
	for _, ident := range idents { // in a fixed order: equal states write equal snapshots
		e := s.dedup.ids[ident]
		sw.put(&queuelog.SnapshotIdentity{Identity: ident[:], MessageID: wire.UUID(e.id), Until: e.until})
	}
	sw.put(&s.fence)
	sw.put(&queuelog.SnapshotEnd{Frames: sw.frames})
	if sw.err != nil {
		return sw.err
	}
	return bw.Flush()
}

type snapshotWriter struct {
	w      *bufio.Writer
	buf    []byte
	frames uint64
	err    error
}

func (sw *snapshotWriter) put(f queuelog.Frame) {
	if sw.err != nil {
		return
	}
	sw.buf = queuelog.AppendFrame(sw.buf[:0], f)
	_, sw.err = sw.w.Write(sw.buf)
	sw.frames++
}

func (s *State) writeLane(sw *snapshotWriter, l Lane) {
	q := s.lanes[l]
	var keys []engine.KeySnapshot
	for k := range q.SnapshotKeys() {
		keys = append(keys, k)
	}
	sw.put(&queuelog.SnapshotLane{Lane: l, Config: ConfigRecord(q.Config()), Messages: uint64(q.Len()), Keys: uint32(len(keys))})
	writeMessages(sw, q)
	chunk := queuelog.SnapshotReady{Ids: make([]wire.UUID, 0, readyChunk)}
	written := 0
	flush := func() {
		if len(chunk.Ids) > 0 {
			sw.put(&chunk)
			written += len(chunk.Ids)
			chunk.Ids = chunk.Ids[:0]
		}
	}
	for _, k := range keys {
		sw.put(&queuelog.SnapshotKey{Name: k.Name, Weight: k.Weight, Deficit: k.Deficit, InRound: k.InRound, Ready: uint64(k.Ready)})
		written = 0
		for id := range q.ReadyOrder(k.Name) {
			if chunk.Ids = append(chunk.Ids, wire.UUID(id)); len(chunk.Ids) == readyChunk {
				flush()
			}
		}
		flush()
		if written != k.Ready && sw.err == nil {
			sw.err = fmt.Errorf("queuegroup: key %q of lane %d listed %d ready messages, its count says %d", k.Name, l, written, k.Ready)
		}
	}
}

// writeMessages writes a lane's messages in enqueue order: runs of plain ones (see plain) as
// SnapshotRun frames of up to readyChunk, each other one as a SnapshotMessage. A backlog is mostly
// plain messages, and a run costs 24 bytes a message where a SnapshotMessage costs 87: the queue
// pauses while its snapshot is written (docs/queue-log.md).
func writeMessages(sw *snapshotWriter, q *engine.Queue) {
	var sm queuelog.SnapshotMessage // the frames are reused: the writer keeps nothing of them
	run := queuelog.SnapshotRun{Ids: make([]wire.UUID, 0, readyChunk), EnqueuedAt: make([]int64, 0, readyChunk)}
	flush := func() {
		if len(run.Ids) > 0 {
			sw.put(&run)
			run.Ids, run.EnqueuedAt = run.Ids[:0], run.EnqueuedAt[:0]
		}
	}
	for m := range q.Messages() {
		sm = queuelog.SnapshotMessage{ID: wire.UUID(m.ID), FairnessKey: m.FairnessKey, Weight: m.Weight,
			EnqueuedAt: m.EnqueuedAt, NotBefore: m.NotBefore, Attempts: m.Attempts, RedriveCount: m.RedriveCount,
			LastError: m.LastError, State: queuelog.MessageState(m.State), LeasedAt: m.LeasedAt,
			LeaseExpiresAt: m.LeaseExpiresAt, Consumer: m.Consumer, Attributes: m.Attributes,
			Grouped: m.Grouped, Group: []byte(m.Group), Unclassified: m.Unclassified, ClassifyTries: m.ClassifyTries}
		if !plain(&sm) {
			flush()
			sw.put(&sm)
			continue
		}
		if len(run.Ids) == readyChunk || len(run.Ids) > 0 && (run.FairnessKey != sm.FairnessKey || run.Weight != sm.Weight) {
			flush()
		}
		run.FairnessKey, run.Weight = sm.FairnessKey, sm.Weight
		run.Ids, run.EnqueuedAt = append(run.Ids, sm.ID), append(run.EnqueuedAt, sm.EnqueuedAt)
	}
	flush()
}

// plain reports whether m is all a SnapshotRun keeps of a message: ready, deliverable from its
// acceptance on (NotBefore = EnqueuedAt), and every field but its ID, fairness key, weight and
// those times zero.
func plain(m *queuelog.SnapshotMessage) bool {
	return m.State == queuelog.StateReady && m.NotBefore == m.EnqueuedAt && m.Attempts == 0 && m.RedriveCount == 0 &&
		m.LastError == "" && m.LeasedAt == 0 && m.LeaseExpiresAt == 0 && m.Consumer == "" &&
		len(m.Attributes) == 0 && !m.Grouped && len(m.Group) == 0 && !m.Unclassified && m.ClassifyTries == 0
}

// runMessage is the SnapshotMessage that message i of a SnapshotRun stands for.
func runMessage(r *queuelog.SnapshotRun, i int) queuelog.SnapshotMessage {
	return queuelog.SnapshotMessage{ID: r.Ids[i], FairnessKey: r.FairnessKey, Weight: r.Weight,
		EnqueuedAt: r.EnqueuedAt[i], NotBefore: r.EnqueuedAt[i], State: queuelog.StateReady}
}

// ErrBadSnapshot reports a snapshot that does not decode or is inconsistent.
var ErrBadSnapshot = errors.New("queuegroup: bad snapshot")

// Restore reads a snapshot written by WriteSnapshot and returns the state it describes, for the
// group of queue name (dead-letter queue dlqName). It reads no further than the state.
func Restore(r io.Reader, name, dlqName string) (*State, error) {
	return NewSnapshotReader(r).State(name, dlqName)
}

// SnapshotReader reads a snapshot: its state, then, if the caller wants them, its bodies.
type SnapshotReader struct {
	sr snapshotReader
	// Alloc is where the restored lanes keep their memory (engine.Config.Alloc; nil: the Go
	// heap): a snapshot records configurations, not where a node keeps its memory.
	Alloc engine.Allocator
}

// NewSnapshotReader returns a reader of the snapshot r.
func NewSnapshotReader(r io.Reader) *SnapshotReader {
	fr := wire.NewFrameReader(r, queuelog.HeaderSize, maxBodyFrame)
	fr.SetMaxFor(func(op byte) int {
		if queuelog.Opcode(op) == queuelog.OpSnapshotBody {
			return maxBodyFrame
		}
		return maxSnapshotFrame
	})
	return &SnapshotReader{sr: snapshotReader{fr: fr}}
}

// maxBodyFrame bounds a SnapshotBody frame: a message body is as large as the broker accepted.
const maxBodyFrame = math.MaxInt32

// State reads the state, up to its SnapshotEnd, and returns it, for the group of queue name
// (dead-letter queue dlqName).
func (r *SnapshotReader) State(name, dlqName string) (*State, error) {
	sr := &r.sr
	var lanes [2]*engine.Queue
	for l := LaneQueue; l <= LaneDeadLetter; l++ {
		n := name
		if l == LaneDeadLetter {
			n = dlqName
		}
		q, err := sr.lane(l, n, r.Alloc)
		if err != nil {
			return nil, err
		}
		lanes[l] = q
	}
	s := fromLanes(lanes[0], lanes[1])
	for {
		f, err := sr.next()
		if err != nil {
			return nil, err
		}
		switch c := f.(type) {
		case *queuelog.SnapshotDeadLetter:
			s.restoreWhy(c)
		case *queuelog.SnapshotIdentity:
			if len(c.Identity) != len(Identity{}) {
				return nil, fmt.Errorf("%w: identity of %d bytes", ErrBadSnapshot, len(c.Identity))
			}
			s.dedup.remember(Identity(c.Identity), engine.MsgID(c.MessageID), c.Until)
		case *queuelog.Fence:
			s.fence = *c
		case *queuelog.SnapshotEnd:
			if c.Frames != sr.frames-1 {
				return nil, fmt.Errorf("%w: %d frames, the end says %d", ErrBadSnapshot, sr.frames-1, c.Frames)
			}
			return s, nil
		default:
			return nil, fmt.Errorf("%w: unexpected %v", ErrBadSnapshot, f.Opcode())
		}
	}
}

type snapshotReader struct {
	fr     *wire.FrameReader
	frames uint64
}

func (sr *snapshotReader) next() (queuelog.Frame, error) {
	body, err := sr.fr.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	sr.frames++
	f, err := queuelog.Decode(queuelog.Opcode(body[0]), body[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: frame %d: %v", ErrBadSnapshot, sr.frames, err)
	}
	return f, nil
}

// expect reads the next frame as a T.
func expect[T queuelog.Frame](sr *snapshotReader) (T, error) {
	f, err := sr.next()
	if err != nil {
		var zero T
		return zero, err
	}
	c, ok := f.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w: frame %d is %v, want %T", ErrBadSnapshot, sr.frames, f.Opcode(), zero)
	}
	return c, nil
}

// messages reads a lane's n messages, each a SnapshotMessage or one of a SnapshotRun's.
func (sr *snapshotReader) messages(rs *engine.Restorer, n uint64) error {
	add := func(m *queuelog.SnapshotMessage) error {
		err := rs.AddMessage(engine.Message{ID: engine.MsgID(m.ID), FairnessKey: m.FairnessKey, Weight: m.Weight,
			EnqueuedAt: m.EnqueuedAt, NotBefore: m.NotBefore, Attempts: m.Attempts, RedriveCount: m.RedriveCount,
			LastError: m.LastError, State: engine.State(m.State), LeasedAt: m.LeasedAt, LeaseExpiresAt: m.LeaseExpiresAt,
			Consumer: m.Consumer, Attributes: attributes(m.Attributes), Grouped: m.Grouped, Group: string(m.Group),
			Unclassified: m.Unclassified, ClassifyTries: m.ClassifyTries})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		return nil
	}
	for added := uint64(0); added < n; {
		f, err := sr.next()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *queuelog.SnapshotMessage:
			if err := add(f); err != nil {
				return err
			}
			added++
		case *queuelog.SnapshotRun:
			if len(f.Ids) == 0 || len(f.EnqueuedAt) != len(f.Ids) || uint64(len(f.Ids)) > n-added {
				return fmt.Errorf("%w: frame %d: a run of %d IDs and %d times where %d messages are left",
					ErrBadSnapshot, sr.frames, len(f.Ids), len(f.EnqueuedAt), n-added)
			}
			for i := range f.Ids {
				m := runMessage(f, i)
				if err := add(&m); err != nil {
					return err
				}
			}
			added += uint64(len(f.Ids))
		default:
			return fmt.Errorf("%w: frame %d is %v, want a message", ErrBadSnapshot, sr.frames, f.Opcode())
		}
	}
	return nil
}

func (sr *snapshotReader) lane(l Lane, name string, alloc engine.Allocator) (*engine.Queue, error) {
	hdr, err := expect[*queuelog.SnapshotLane](sr)
	if err != nil {
		return nil, err
	}
	if hdr.Lane != l {
		return nil, fmt.Errorf("%w: lane %v where %v was expected", ErrBadSnapshot, hdr.Lane, l)
	}
	cfg := EngineConfig(&hdr.Config)
	cfg.Alloc = alloc
	rs, err := engine.NewRestorer(name, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: lane %v: %v", ErrBadSnapshot, l, err)
	}
	if l == LaneDeadLetter {
		rs.DisableOrdering() // as fromLanes does
		rs.DeliverUnclassified()
	}
	if err := sr.messages(rs, hdr.Messages); err != nil {
		return nil, err
	}
	for i := uint32(0); i < hdr.Keys; i++ {
		k, err := expect[*queuelog.SnapshotKey](sr)
		if err != nil {
			return nil, err
		}
		if err := rs.AddKey(engine.KeySnapshot{Name: k.Name, Weight: k.Weight, Deficit: k.Deficit, InRound: k.InRound}); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		for left := k.Ready; left > 0; {
			chunk, err := expect[*queuelog.SnapshotReady](sr)
			if err != nil {
				return nil, err
			}
			if uint64(len(chunk.Ids)) > left {
				return nil, fmt.Errorf("%w: key %q lists more ready messages than its count", ErrBadSnapshot, k.Name)
			}
			for _, id := range chunk.Ids {
				if err := rs.AddReady(engine.MsgID(id)); err != nil {
					return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
				}
			}
			left -= uint64(len(chunk.Ids))
		}
	}
	q, err := rs.Queue()
	if err != nil {
		return nil, fmt.Errorf("%w: lane %v: %v", ErrBadSnapshot, l, err)
	}
	return q, nil
}
