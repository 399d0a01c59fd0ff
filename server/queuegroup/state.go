// Package queuegroup is the replicated state machine of one queue group: a queue and its
// dead-letter queue (the two lanes of the group) with the group's deduplication memory, and the
// queue log's commands (spec/queuelog.yaml) that change it.
//
// Every change goes through a method of State that applies it and, while the State records,
// appends the command to the entry being built. The leader calls those methods as it decides; a
// replica, or a restart replaying the log, calls ApplyEntry, which decodes each command and calls
// the same methods. So the leader and every replay run the same code on the same commands, and
// reach the same state.
//
// # The caller's duties
//
//   - Decide first: IDs, times, DRR picks (engine.Queue.Dispatch), retry or dead-letter
//     (DecideFailure), lease expiries (DecideExtend) are made on the leader before a command.
//   - Times given to one State never decrease (one leader clock).
//   - Bodies are not kept here: the group's log store keeps them beside their entries
//     (Bodies.Split, Bodies.Join, for storage.EntryBodies), and the broker deletes those an applied entry acks (Deleted).
//   - A State is not safe for concurrent use.
package queuegroup

import (
	"errors"
	"fmt"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
)

// Lane selects the queue or its dead-letter queue.
type Lane = queuelog.Lane

const (
	// LaneQueue is the queue itself.
	LaneQueue = queuelog.LaneQueue
	// LaneDeadLetter is its dead-letter queue.
	LaneDeadLetter = queuelog.LaneDeadLetter
)

// Identity is a deduplication identity (see keys.Identity).
type Identity = keys.Identity

// State is one queue group's replicated state.
type State struct {
	lanes [2]*engine.Queue
	dedup dedupMemory

	fence     queuelog.Fence // the last applied entry's (replaying) or proposed entry's (leading)
	recording bool
	logLeases [2]bool // whether a lane's Dispatch records its leases (committed delivery durability)
	entry     []byte
	acks      queuelog.Ack // acks coalesced into one frame until another command comes
	msgs      []engine.Message
	why       map[engine.MsgID]DeadLetter // of dead-letter lane messages (deadletter.go)
}

// ErrUnknownLane reports a command for a lane that does not exist.
var ErrUnknownLane = errors.New("queuegroup: unknown lane")

// New returns the empty state of the group of queue name, whose dead-letter queue is dlqName.
// The dead-letter lane never dead-letters (there is nowhere further to go): its failures always
// retry.
func New(name, dlqName string, queueCfg, dlqCfg engine.Config) (*State, error) {
	q, err := engine.NewQueue(name, queueCfg)
	if err != nil {
		return nil, err
	}
	d, err := engine.NewQueue(dlqName, dlqCfg)
	if err != nil {
		return nil, err
	}
	return fromLanes(q, d), nil
}

func fromLanes(q, d *engine.Queue) *State {
	d.DisableOrdering()     // dead letters keep their groups for redrive, unordered here
	d.DeliverUnclassified() // and stay unclassified, but deliverable, until redriven
	d.SetFailurePolicy(engine.FailurePolicyFunc(func(*engine.Message, string) (engine.FailureDecision, bool) {
		return engine.FailureDecision{}, true
	}))
	return &State{lanes: [2]*engine.Queue{q, d}, dedup: newDedupMemory()}
}

// Lane returns the engine of lane l. Reading it is free; every change must go through State.
func (s *State) Lane(l Lane) *engine.Queue { return s.lanes[l&1] }

// Record turns recording on or off. While on, every change appends its command to the entry.
func (s *State) Record(on bool) { s.recording = on }

// TakeEntry returns the commands recorded since the last call, as one log entry (nil when there
// are none), and starts a new entry. The caller owns the returned slice.
// Every entry opens with its Fence (see spec/queuelog.yaml): the State's epoch and the entry's
// sequence number in it.
func (s *State) TakeEntry() []byte {
	s.flushAcks()
	e := s.entry
	s.entry = nil
	if len(e) == 0 {
		return nil
	}
	s.fence.Seq++
	queuelog.AppendFrame(e[:0], &s.fence) // overwrites the placeholder begin reserved
	return e
}

// Lead starts a new epoch for a leader of Raft term term: the leader calls it when it takes the
// state over (at start-up, after a reload, or on becoming the group's leader), so that no entry
// of an earlier epoch can apply after its first one. The epoch carries the term in its high 32
// bits and the takeovers within the term in its low ones: two leaders of different terms never
// propose under one epoch, even when neither saw the other's entries, and a later term's epochs
// follow every earlier one's (logs written before terms were recorded have epochs below 1<<32).
func (s *State) Lead(term uint64) {
	if first := term << 32; first > s.fence.Epoch {
		s.fence.Epoch = first
	} else {
		s.fence.Epoch++
	}
	s.fence.Seq = 0
}

// Fence returns the fence of the last entry applied (replaying) or taken (leading).
func (s *State) Fence() queuelog.Fence { return s.fence }

// begin reserves room for the entry's Fence before its first command.
func (s *State) begin() {
	if len(s.entry) == 0 {
		s.entry = queuelog.AppendFrame(s.entry, &queuelog.Fence{})
	}
}

func (s *State) record(f queuelog.Frame) {
	if !s.recording {
		return
	}
	s.flushAcks()
	s.begin()
	s.appendFrame(f)
}

// appendFrame appends f to the entry, making room for all of it first: its encoding appends
// field by field, and an enqueue of many bodies grown that way copies the entry so far again and
// again (append grows a large slice by a quarter at a time). Room is made by at least doubling,
// so that the several commands of a round copy the entry about once.
func (s *State) appendFrame(f queuelog.Frame) {
	need := queuelog.LengthSize + queuelog.HeaderSize + f.Size()
	if cap(s.entry)-len(s.entry) < need {
		grown := make([]byte, len(s.entry), max(2*cap(s.entry), len(s.entry)+need))
		copy(grown, s.entry)
		s.entry = grown
	}
	s.entry = queuelog.AppendFrame(s.entry, f)
}

func (s *State) flushAcks() {
	if len(s.acks.Ids) == 0 {
		return
	}
	s.begin()
	s.appendFrame(&s.acks)
	clear(s.acks.Ids)
	s.acks.Ids = s.acks.Ids[:0]
}

func (s *State) lane(l Lane) (*engine.Queue, error) {
	if l > LaneDeadLetter {
		return nil, fmt.Errorf("%w: %d", ErrUnknownLane, l)
	}
	return s.lanes[l], nil
}

// Enqueue stores c's messages in c.Lane and remembers their identities. The engine keeps
// nothing of c, so c may be reused after the call.
func (s *State) Enqueue(c *queuelog.Enqueue) error {
	q, err := s.lane(c.Lane)
	if err != nil {
		return err
	}
	msgs := s.msgs[:0]
	for i := range c.Messages {
		m := &c.Messages[i]
		msgs = append(msgs, engine.Message{ID: engine.MsgID(m.ID), FairnessKey: m.FairnessKey, Weight: m.Weight,
			EnqueuedAt: c.At, NotBefore: m.NotBefore, Attributes: attributes(m.Attributes),
			Grouped: m.Grouped, Group: string(m.Group), Unclassified: m.Unclassified})
	}
	err = q.ApplyEnqueue(engine.Enqueue{At: c.At, Msgs: msgs})
	clear(msgs)
	s.msgs = msgs[:0]
	if err != nil {
		return err
	}
	for i := range c.Messages {
		m := &c.Messages[i]
		if len(m.Identity) == len(Identity{}) {
			s.dedup.remember(Identity(m.Identity), engine.MsgID(m.ID), m.DedupUntil)
		}
	}
	s.record(c)
	return nil
}

// attributes returns a message's stored attributes: nil for none, so that a message without any
// costs the engine nothing.
func attributes(a map[string]string) map[string]string {
	if len(a) == 0 {
		return nil
	}
	return a
}

// LogLeases sets whether Dispatch on lane l records its leases: a lane with committed delivery
// durability logs them, a fast one keeps them in the leader's memory only.
func (s *State) LogLeases(l Lane, on bool) { s.logLeases[l] = on }

// Dispatch leases up to max ready messages of lane l at time now to subscriptions with credit
// (engine.Queue.Dispatch), appending them to buf, and records the leases when the lane logs them
// (LogLeases). Deciding and recording are one call, so no lease is granted unrecorded.
func (s *State) Dispatch(l Lane, now int64, max int, buf []engine.Lease) []engine.Lease {
	start := len(buf)
	buf = s.lanes[l].Dispatch(now, max, buf)
	if s.logLeases[l] {
		s.leased(l, now, buf[start:])
	}
	return buf
}

// leased records leases that engine.Queue.Dispatch has already applied to lane l.
func (s *State) leased(l Lane, leasedAt int64, leases []engine.Lease) {
	if !s.recording || len(leases) == 0 {
		return
	}
	c := queuelog.Lease{Lane: l, LeasedAt: leasedAt, Leases: make([]queuelog.LogLease, len(leases))}
	for i, le := range leases {
		c.Leases[i] = queuelog.LogLease{ID: wire.UUID(le.ID), Consumer: le.Consumer, ExpiresAt: le.ExpiresAt}
	}
	s.record(&c)
}

func (s *State) applyLease(c *queuelog.Lease) error {
	q, err := s.lane(c.Lane)
	if err != nil {
		return err
	}
	for _, le := range c.Leases {
		if err := q.ApplyLease(engine.Lease{ID: engine.MsgID(le.ID), Consumer: le.Consumer, LeasedAt: c.LeasedAt, ExpiresAt: le.ExpiresAt}); err != nil {
			return fmt.Errorf("lease %v: %w", engine.MsgID(le.ID), err)
		}
	}
	return nil
}

// Ack removes a message of lane l for good at time at (when it heads an ordering group, the next
// message of the group is scheduled then).
func (s *State) Ack(l Lane, id engine.MsgID, at int64) error {
	q, err := s.lane(l)
	if err != nil {
		return err
	}
	if err := q.ApplyAck(engine.Ack{ID: id, At: at}); err != nil {
		return err
	}
	if l == LaneDeadLetter {
		s.forgetWhy(id)
	}
	if s.recording {
		if (s.acks.Lane != l || s.acks.At != at) && len(s.acks.Ids) > 0 {
			s.flushAcks()
		}
		s.acks.Lane, s.acks.At = l, at
		s.acks.Ids = append(s.acks.Ids, wire.UUID(id))
	}
	return nil
}

// Extend moves a lease's expiry; log is false for a lane with fast delivery durability, whose
// leases are not in the log.
func (s *State) Extend(l Lane, e engine.Extend, log bool) error {
	q, err := s.lane(l)
	if err != nil {
		return err
	}
	if err := q.ApplyExtend(e); err != nil {
		return err
	}
	if log {
		s.record(&queuelog.Extend{Lane: l, ID: wire.UUID(e.ID), ExpiresAt: e.ExpiresAt, Consumer: e.Consumer})
	}
	return nil
}

// Fail applies a failure decided by DecideFailure. A message dead-lettered out of the queue lane
// moves to the dead-letter lane as it stands after the failure, with why (DeadLettered; logged as
// a DeadLetter command); moved returns it then.
func (s *State) Fail(l Lane, f engine.Fail) (moved engine.Message, dead bool, err error) {
	q, err := s.lane(l)
	if err != nil {
		return engine.Message{}, false, err
	}
	m, err := q.ApplyFail(f)
	if err != nil {
		return engine.Message{}, false, err
	}
	if !f.DeadLetter || l != LaneQueue {
		s.record(&queuelog.Fail{Lane: l, ID: wire.UUID(f.ID), At: f.At, Error: f.Error, DeadLetter: f.DeadLetter,
			NotBefore: f.NotBefore, Attempts: f.Attempts})
		return m, false, nil
	}
	s.record(&queuelog.DeadLetter{ID: wire.UUID(f.ID), At: f.At, Error: f.Error, Attempts: f.Attempts, Reason: f.Reason})
	moved = engine.DeadLetterCopy(m)
	if err := s.lanes[LaneDeadLetter].ApplyEnqueue(engine.Enqueue{At: f.At, Msgs: []engine.Message{moved}}); err != nil {
		return engine.Message{}, false, fmt.Errorf("dead-letter %v: %w", f.ID, err)
	}
	s.keepWhy(f.ID, DeadLetter{Reason: f.Reason, Error: f.Error, Attempts: f.Attempts, At: f.At})
	return moved, true, nil
}

// Redrive moves messages of the dead-letter lane back to the queue lane at time at, in the order
// given; it skips IDs that are not stored there and returns how many moved.
func (s *State) Redrive(at int64, ids []engine.MsgID) (int, error) {
	c := queuelog.Redrive{At: at, Ids: make([]wire.UUID, 0, len(ids))}
	d, q := s.lanes[LaneDeadLetter], s.lanes[LaneQueue]
	for _, id := range ids {
		m, err := d.ApplyRemove(engine.Remove{ID: id, At: at})
		if err != nil {
			continue
		}
		s.forgetWhy(id)
		if err := q.ApplyEnqueue(engine.Enqueue{At: at, Msgs: []engine.Message{engine.RedriveCopy(m)}}); err != nil {
			return len(c.Ids), fmt.Errorf("redrive %v: %w", id, err)
		}
		c.Ids = append(c.Ids, wire.UUID(id))
	}
	if len(c.Ids) > 0 {
		s.record(&c)
	}
	return len(c.Ids), nil
}

// Configure replaces lane l's engine configuration.
func (s *State) Configure(l Lane, cfg engine.Config) error {
	q, err := s.lane(l)
	if err != nil {
		return err
	}
	if err := q.ApplyUpdateConfig(engine.UpdateConfig{Config: cfg}); err != nil {
		return err
	}
	s.record(&queuelog.Configure{Lane: l, Config: ConfigRecord(cfg)})
	return nil
}

// Forget drops the identities remembered until at or before at; it records a command only when
// one is dropped.
func (s *State) Forget(at int64) {
	if s.dedup.forget(at) > 0 {
		s.record(&queuelog.Forget{At: at})
	}
}

// Hibernate records that the leader puts the group to sleep at at (a replicated group: every
// replica that applies the entry stops its Raft group). It changes nothing.
func (s *State) Hibernate(at int64) { s.record(&queuelog.Hibernate{At: at}) }

// Duplicate returns the message first accepted with identity id, if the group still remembers
// it at now.
func (s *State) Duplicate(id Identity, now int64) (engine.MsgID, bool) {
	return s.dedup.lookup(id, now)
}

// Remembered returns how many deduplication identities the group remembers (an identity
// remembered again after its window ended counts twice until the round's Forget).
func (s *State) Remembered() int { return len(s.dedup.order) }

// NextForget is when the oldest remembered identity expires.
func (s *State) NextForget() (int64, bool) { return s.dedup.next() }

// ConfigRecord converts an engine configuration to its log record.
func ConfigRecord(c engine.Config) queuelog.QueueConfig {
	return queuelog.QueueConfig{VisibilityTimeoutMs: c.VisibilityTimeoutMs, MaxAttempts: c.MaxAttempts, Backoff: uint8(c.Backoff),
		BackoffInitialMs: c.BackoffInitialMs, BackoffMaxMs: c.BackoffMaxMs, Quantum: c.Quantum}
}

// EngineConfig converts a log record to an engine configuration.
func EngineConfig(c *queuelog.QueueConfig) engine.Config {
	return engine.Config{VisibilityTimeoutMs: c.VisibilityTimeoutMs, MaxAttempts: c.MaxAttempts, Backoff: engine.Backoff(c.Backoff),
		BackoffInitialMs: c.BackoffInitialMs, BackoffMaxMs: c.BackoffMaxMs, Quantum: c.Quantum}
}
