package queuegroup

import (
	"encoding/binary"
	"fmt"

	"github.com/filamq/fila/generated/queuelog"
)

// A message body is stored once: the log store keeps an entry without the headers and payloads of
// its Enqueue commands (Bodies.Split) and each body under the group's body keys, in the same
// atomic write; reading the entry back puts every body that is still stored into it
// (Bodies.Join). An Ack deletes a body, so an entry read back after its messages were acked lacks
// their bodies — which nothing needs: applying it again stores messages that a later Ack in the
// log removes.

// Bodies finds the message bodies in the group's log entries — the headers and payloads of its
// Enqueue commands — for the group's log store (server/storage.EntryBodies, which it implements
// without importing storage: the store is below the state machine). The zero value is ready.
type Bodies struct{}

// Split returns entry without the headers and payloads of its messages and calls put for each
// message's body (aliasing entry).
func (Bodies) Split(entry []byte, put func(id [16]byte, headers map[string]string, payload []byte)) ([]byte, error) {
	return rewriteEnqueues(entry, len(entry)/8+64, func(m *queuelog.LogMessage) {
		put(m.ID, m.Headers, m.Payload)
		m.Headers, m.Payload = nil, nil
	})
}

// Join returns a split entry with the bodies get still finds put back.
func (Bodies) Join(entry []byte, get func(id [16]byte) (headers map[string]string, payload []byte, ok bool)) ([]byte, error) {
	return rewriteEnqueues(entry, len(entry)*2, func(m *queuelog.LogMessage) {
		if h, p, ok := get(m.ID); ok {
			m.Headers, m.Payload = h, p
		}
	})
}

// IDs appends to ids the IDs of the messages of entry's Enqueue commands, in the entry's order:
// what Join will ask for, so that a store can read their bodies at once.
func (Bodies) IDs(entry []byte, ids [][16]byte) ([][16]byte, error) {
	err := rawFrames(entry, func(frame []byte) error {
		if queuelog.Opcode(frame[queuelog.LengthSize]) != queuelog.OpEnqueue {
			return nil
		}
		var c queuelog.Enqueue
		if err := c.Decode(frame[queuelog.LengthSize+1:]); err != nil {
			return err
		}
		for i := range c.Messages {
			ids = append(ids, c.Messages[i].ID)
		}
		return nil
	})
	return ids, err
}

// rewriteEnqueues returns a copy of entry in which every message of every Enqueue went through
// fn; the other commands are copied as they are.
func rewriteEnqueues(entry []byte, sizeHint int, fn func(m *queuelog.LogMessage)) ([]byte, error) {
	out := make([]byte, 0, sizeHint)
	err := rawFrames(entry, func(frame []byte) error {
		if queuelog.Opcode(frame[queuelog.LengthSize]) != queuelog.OpEnqueue {
			out = append(out, frame...)
			return nil
		}
		var c queuelog.Enqueue
		if err := c.Decode(frame[queuelog.LengthSize+1:]); err != nil {
			return err
		}
		for i := range c.Messages {
			fn(&c.Messages[i])
		}
		out = queuelog.AppendFrame(out, &c)
		return nil
	})
	return out, err
}

// rawFrames calls fn with each whole frame (length prefix included) of an entry.
func rawFrames(entry []byte, fn func(frame []byte) error) error {
	for off := 0; off < len(entry); {
		if len(entry)-off < queuelog.LengthSize+queuelog.HeaderSize {
			return fmt.Errorf("queuegroup: entry truncated at byte %d", off)
		}
		n := int(binary.BigEndian.Uint32(entry[off:]))
		if n < queuelog.HeaderSize || n > len(entry)-off-queuelog.LengthSize {
			return fmt.Errorf("queuegroup: frame length %d at byte %d exceeds the entry", n, off)
		}
		end := off + queuelog.LengthSize + n
		if err := fn(entry[off:end:end]); err != nil {
			return fmt.Errorf("queuegroup: frame at byte %d: %w", off, err)
		}
		off = end
	}
	return nil
}
