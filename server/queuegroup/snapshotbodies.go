package queuegroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// BodyFunc receives one message body. Headers and payload are valid only during the call.
type BodyFunc func(id engine.MsgID, headers map[string]string, payload []byte) error

// WriteBodies writes the bodies section of a snapshot of s (after WriteSnapshot's frames, to the
// same stream): SnapshotBodies with applied, the log index s is as of, then a SnapshotBody for
// each body each yields whose message s holds in either lane, then SnapshotBodiesEnd. each calls
// its fn for the bodies stored under the group as of applied, in ascending ID order, and returns
// the first error of fn or its own; the bodies of messages s does not hold (stored for entries
// after applied) are skipped.
func (s *State) WriteBodies(w io.Writer, applied uint64, each func(fn BodyFunc) error) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	sw := snapshotWriter{w: bw}
	sw.put(&queuelog.SnapshotBodies{Applied: applied})
	var b queuelog.SnapshotBody
	n := uint64(0)
	err := each(func(id engine.MsgID, headers map[string]string, payload []byte) error {
		if !s.holds(id) {
			return nil
		}
		b = queuelog.SnapshotBody{ID: wire.UUID(id), Headers: headers, Payload: payload}
		sw.put(&b)
		n++
		return sw.err
	})
	if err != nil {
		return err
	}
	sw.put(&queuelog.SnapshotBodiesEnd{Bodies: n})
	if sw.err != nil {
		return sw.err
	}
	return bw.Flush()
}

// holds reports whether either lane stores message id.
func (s *State) holds(id engine.MsgID) bool {
	if _, ok := s.lanes[LaneQueue].Get(id); ok {
		return true
	}
	_, ok := s.lanes[LaneDeadLetter].Get(id)
	return ok
}

// Bodies reads the header of the bodies section, after State: applied is the log index the
// state is as of. ok is false for a snapshot without bodies (written before snapshots kept them:
// the bodies are in the store of the node that wrote it).
func (r *SnapshotReader) Bodies() (applied uint64, ok bool, err error) {
	body, err := r.sr.fr.Next()
	if errors.Is(err, io.EOF) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	r.sr.frames++
	if queuelog.Opcode(body[0]) != queuelog.OpSnapshotBodies {
		return 0, false, fmt.Errorf("%w: frame %d is %v after the state, want bodies", ErrBadSnapshot, r.sr.frames, queuelog.Opcode(body[0]))
	}
	var h queuelog.SnapshotBodies
	if err := h.Decode(body[1:]); err != nil {
		return 0, false, fmt.Errorf("%w: frame %d: %v", ErrBadSnapshot, r.sr.frames, err)
	}
	return h.Applied, true, nil
}

// EachBody calls fn for each body of the section Bodies opened, in the snapshot's (ID) order,
// and checks that the section is whole.
func (r *SnapshotReader) EachBody(fn BodyFunc) error {
	n := uint64(0)
	for {
		f, err := r.sr.next()
		if err != nil {
			return err
		}
		switch c := f.(type) {
		case *queuelog.SnapshotBody:
			if err := fn(engine.MsgID(c.ID), c.Headers, c.Payload); err != nil {
				return err
			}
			n++
		case *queuelog.SnapshotBodiesEnd:
			if c.Bodies != n {
				return fmt.Errorf("%w: %d bodies, the end says %d", ErrBadSnapshot, n, c.Bodies)
			}
			return nil
		default:
			return fmt.Errorf("%w: frame %d is %v among the bodies", ErrBadSnapshot, r.sr.frames, f.Opcode())
		}
	}
}
