package queuegroup

import (
	"bytes"
	"maps"
	"slices"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
)

// Why a message is in the dead-letter lane. The dead-letter lane keeps it with the message from
// the command that moved it there (DeadLetter, or Reclassify's dead_letter outcome) until the
// message leaves the lane, so that its deliveries can say why while its own failures there change
// its last error and attempt count. Snapshots carry it (SnapshotDeadLetter).

// ReasonUnclassified is the reason of a parked message dead-lettered because on_enqueue failed on
// it as many times as the queue allows (park_dead_letter_after).
const ReasonUnclassified = "unclassified"

// DeadLetter is why a message is in the dead-letter lane.
type DeadLetter struct {
	Reason   string // engine.ReasonMaxAttempts, engine.ReasonScript, ReasonUnclassified, the broker's own; "" when unknown
	Error    string // the failure text it was dead-lettered with
	Attempts uint32 // its attempt count then
	At       int64  // Unix ms it was dead-lettered
}

// DeadLettered returns why message id of the dead-letter lane is there; false when it is not
// there or was dead-lettered before reasons were kept.
func (s *State) DeadLettered(id engine.MsgID) (DeadLetter, bool) {
	d, ok := s.why[id]
	if !ok {
		return DeadLetter{}, false
	}
	if _, stored := s.lanes[LaneDeadLetter].Get(id); !stored {
		return DeadLetter{}, false
	}
	return d, true
}

// keepWhy records why id entered the dead-letter lane. Records of messages that left the lane
// are dropped as they go (forgetWhy) or, for any other way out, by a sweep once there are twice
// as many records as dead letters: the records never outgrow the lane by more than that.
func (s *State) keepWhy(id engine.MsgID, d DeadLetter) {
	if s.why == nil {
		s.why = make(map[engine.MsgID]DeadLetter)
	}
	s.why[id] = d
	if len(s.why) > 2*s.lanes[LaneDeadLetter].Len()+64 {
		maps.DeleteFunc(s.why, func(id engine.MsgID, _ DeadLetter) bool {
			_, stored := s.lanes[LaneDeadLetter].Get(id)
			return !stored
		})
	}
}

// forgetWhy drops the record of a message that left the dead-letter lane.
func (s *State) forgetWhy(id engine.MsgID) { delete(s.why, id) }

// writeWhy writes a SnapshotDeadLetter for each message of the dead-letter lane with a record, in
// ID order (equal states write equal snapshots).
func (s *State) writeWhy(sw *snapshotWriter) {
	ids := make([]engine.MsgID, 0, len(s.why))
	for id := range s.why {
		if _, stored := s.lanes[LaneDeadLetter].Get(id); stored {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b engine.MsgID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		d := s.why[id]
		sw.put(&queuelog.SnapshotDeadLetter{ID: wire.UUID(id), At: d.At, Error: d.Error, Attempts: d.Attempts, Reason: d.Reason})
	}
}

// restoreWhy takes a SnapshotDeadLetter back.
func (s *State) restoreWhy(c *queuelog.SnapshotDeadLetter) {
	s.keepWhy(engine.MsgID(c.ID), DeadLetter{Reason: c.Reason, Error: c.Error, Attempts: c.Attempts, At: c.At})
}
