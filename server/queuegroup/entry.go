package queuegroup

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/engine"
)

// Frames calls fn for each command of a log entry, in order, with the command decoded. Byte
// fields of the command alias entry. It stops at the first error, from fn or from a malformed
// frame.
func Frames(entry []byte, fn func(queuelog.Frame) error) error {
	for off := 0; off < len(entry); {
		if len(entry)-off < queuelog.LengthSize {
			return fmt.Errorf("queuegroup: entry truncated at byte %d", off)
		}
		n := int(binary.BigEndian.Uint32(entry[off:]))
		off += queuelog.LengthSize
		if n < queuelog.HeaderSize || n > len(entry)-off {
			return fmt.Errorf("queuegroup: frame length %d at byte %d exceeds the entry", n, off)
		}
		f, err := queuelog.Decode(queuelog.Opcode(entry[off]), entry[off+1:off+n])
		if err != nil {
			return fmt.Errorf("queuegroup: command at byte %d: %w", off, err)
		}
		if err := fn(f); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// ApplyEntry applies every command of a log entry, in order (a replica, or a restart replaying
// the log). It does not record. A command the state refuses is an error: the log and the state
// have diverged, which a correct leader never causes.
//
// An entry whose Fence does not follow the last applied one changes nothing and returns
// ErrFenced: its leader had a proposal fail before it, and every replica skips it alike.
func (s *State) ApplyEntry(entry []byte) error {
	f, err := EntryFence(entry)
	if err != nil {
		return err
	}
	if !Follows(s.fence, f) {
		return fmt.Errorf("%w: entry %d.%d after %d.%d", ErrFenced, f.Epoch, f.Seq, s.fence.Epoch, s.fence.Seq)
	}
	s.fence = f
	rec := s.recording
	s.recording = false
	defer func() { s.recording = rec }()
	first := true
	return Frames(entry, func(fr queuelog.Frame) error {
		if first {
			first = false
			return nil // the fence
		}
		return s.apply(fr)
	})
}

// ErrFenced reports an entry that does not follow the last applied one (see Fence).
var ErrFenced = errors.New("queuegroup: entry fenced off")

// EntryFence returns the Fence that opens an entry.
func EntryFence(entry []byte) (queuelog.Fence, error) {
	var f queuelog.Fence
	if len(entry) < queuelog.LengthSize+queuelog.HeaderSize || queuelog.Opcode(entry[queuelog.LengthSize]) != queuelog.OpFence {
		return f, fmt.Errorf("queuegroup: entry does not open with a Fence")
	}
	n := int(binary.BigEndian.Uint32(entry))
	if n < queuelog.HeaderSize || n > len(entry)-queuelog.LengthSize {
		return f, fmt.Errorf("queuegroup: entry's Fence has length %d in an entry of %d bytes", n, len(entry))
	}
	if err := f.Decode(entry[queuelog.LengthSize+1 : queuelog.LengthSize+n]); err != nil {
		return f, fmt.Errorf("queuegroup: entry's Fence: %w", err)
	}
	return f, nil
}

// Hibernates reports whether an entry puts the group to sleep: its first command, after the
// Fence, is Hibernate (State.Hibernate; the leader records it first in a round of its own).
func Hibernates(entry []byte) bool {
	if len(entry) < queuelog.LengthSize {
		return false
	}
	off := queuelog.LengthSize + int(binary.BigEndian.Uint32(entry))
	return off >= 0 && len(entry) > off+queuelog.LengthSize && queuelog.Opcode(entry[off+queuelog.LengthSize]) == queuelog.OpHibernate
}

// Follows reports whether an entry fenced next applies after one fenced last: the same epoch and
// the next sequence number, or a later epoch's first entry.
func Follows(last, next queuelog.Fence) bool {
	if next.Epoch == last.Epoch {
		return next.Seq == last.Seq+1
	}
	return next.Epoch > last.Epoch && next.Seq == 1
}

func (s *State) apply(f queuelog.Frame) error {
	var err error
	switch c := f.(type) {
	case *queuelog.Enqueue:
		err = s.Enqueue(c)
	case *queuelog.Lease:
		err = s.applyLease(c)
	case *queuelog.Ack:
		for _, id := range c.Ids {
			if err = s.Ack(c.Lane, engine.MsgID(id), c.At); err != nil {
				break
			}
		}
	case *queuelog.Extend:
		err = s.Extend(c.Lane, engine.Extend{ID: engine.MsgID(c.ID), ExpiresAt: c.ExpiresAt, Consumer: c.Consumer}, false)
	case *queuelog.Fail:
		_, _, err = s.Fail(c.Lane, engine.Fail{ID: engine.MsgID(c.ID), At: c.At, Error: c.Error, DeadLetter: c.DeadLetter,
			NotBefore: c.NotBefore, Attempts: c.Attempts})
	case *queuelog.DeadLetter:
		_, _, err = s.Fail(LaneQueue, engine.Fail{ID: engine.MsgID(c.ID), At: c.At, Error: c.Error, DeadLetter: true,
			Attempts: c.Attempts, Reason: c.Reason})
	case *queuelog.Redrive:
		ids := make([]engine.MsgID, len(c.Ids))
		for i, id := range c.Ids {
			ids[i] = engine.MsgID(id)
		}
		_, err = s.Redrive(c.At, ids)
	case *queuelog.Configure:
		err = s.Configure(c.Lane, EngineConfig(&c.Config))
	case *queuelog.Reclassify:
		_, err = s.Reclassify(c.At, c.Items)
	case *queuelog.RedriveClassified:
		_, err = s.RedriveClassified(c.At, c.Items)
	case *queuelog.Forget:
		s.Forget(c.At)
	case *queuelog.Hibernate:
		// Puts the group to sleep (the broker reads it: hibernate.go); no state changes.
	default:
		err = fmt.Errorf("queuegroup: %v is not a queue command", f.Opcode())
	}
	if err != nil {
		return fmt.Errorf("queuegroup: apply %v: %w", f.Opcode(), err)
	}
	return nil
}

// Deleted calls del for every message an entry removes from the group for good (its Ack), whose
// body is then no longer needed. It needs no state: a body belongs to the group, whichever lane
// holds its message, so moves between lanes change no body.
func Deleted(entry []byte, del func(id engine.MsgID)) error {
	var c queuelog.Ack
	return rawFrames(entry, func(frame []byte) error {
		if queuelog.Opcode(frame[queuelog.LengthSize]) != queuelog.OpAck {
			return nil // only acks are decoded: an Enqueue's bodies are skipped unread
		}
		if err := c.Decode(frame[queuelog.LengthSize+1:]); err != nil {
			return err
		}
		for _, id := range c.Ids {
			del(engine.MsgID(id))
		}
		return nil
	})
}
