package broker

import (
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// What a queue writes per message is kept small, because storage operations are the hot path's
// main cost: a message's body once (m key), a state record only when something other than an
// ordinary delivery happens to it (s key: retry, extension, move), and its leases together with
// the other leases of the same round in one lease log (l key). An ack deletes the body (and the
// state record, if the message has one). The actor remembers which messages have a state record
// and which lease log holds each current lease, so that it writes no tombstones for keys that do
// not exist and deletes a lease log once none of its entries is current.
type persistence struct {
	hasState  map[engine.MsgID]struct{}
	leaseOf   map[engine.MsgID]uint64 // message → lease log holding its current lease
	leaseLogs map[uint64]int          // lease log → entries still current
	nextLog   uint64
	round     []store.LeaseEntry // leases granted in this round, written at its end
}

func newPersistence() persistence {
	return persistence{hasState: map[engine.MsgID]struct{}{}, leaseOf: map[engine.MsgID]uint64{}, leaseLogs: map[uint64]int{}, nextLog: 1}
}

// supersede marks a message's lease entry as no longer current.
func (a *actor) supersede(id engine.MsgID) {
	p := &a.p
	seq, ok := p.leaseOf[id]
	if !ok {
		return
	}
	delete(p.leaseOf, id)
	if p.leaseLogs[seq]--; p.leaseLogs[seq] <= 0 {
		delete(p.leaseLogs, seq)
		a.batch.DeleteLeaseLog(a.name, seq)
	}
}

// putState writes a message's state record.
func (a *actor) putState(id engine.MsgID, r *store.StateRecord) {
	a.batch.PutState(a.name, storage.ID(id), r)
	a.p.hasState[id] = struct{}{}
	a.supersede(id)
}

// writeState records a message's current engine state.
func (a *actor) writeState(id engine.MsgID, reason store.DeadLetterReason) {
	if m, ok := a.eng.Get(id); ok {
		a.putState(id, stateRecord(&m, reason))
	}
}

// deleteMessage removes a message from this queue's storage.
func (a *actor) deleteMessage(id engine.MsgID) {
	_, has := a.p.hasState[id]
	a.batch.DeleteMessage(a.name, storage.ID(id), has)
	delete(a.p.hasState, id)
	delete(a.claimed, id)
	a.supersede(id)
	a.bodies.remove(id)
}

// recordLease adds a delivery to the round's lease log.
func (a *actor) recordLease(l engine.Lease, attempts uint32) {
	a.supersede(l.ID)
	a.p.round = append(a.p.round, store.LeaseEntry{
		ID: wire.UUID(l.ID), Attempts: attempts, LeasedAt: uint64(l.LeasedAt), ExpiresAt: uint64(l.ExpiresAt), Consumer: l.Consumer,
	})
	a.p.leaseOf[l.ID] = a.p.nextLog
}

// flushLeases writes the round's lease log.
func (a *actor) flushLeases() {
	p := &a.p
	if len(p.round) == 0 {
		return
	}
	a.batch.PutLeaseLog(a.name, p.nextLog, &store.LeaseLogRecord{Leases: p.round})
	p.leaseLogs[p.nextLog] = len(p.round)
	p.nextLog++
	clear(p.round)
	p.round = p.round[:0]
}

func stateRecord(m *engine.Message, reason store.DeadLetterReason) *store.StateRecord {
	return &store.StateRecord{
		Attempts:       m.Attempts,
		RedriveCount:   m.RedriveCount,
		NotBefore:      uint64(max(m.NotBefore, 0)),
		LeasedAt:       uint64(max(m.LeasedAt, 0)),
		LeaseExpiresAt: uint64(max(m.LeaseExpiresAt, 0)),
		Consumer:       m.Consumer,
		LastError:      m.LastError,
		Reason:         reason,
	}
}
