package broker

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// reclaimConsumer holds, after a restart, the messages of a fast-durability queue that may have
// been leased before the crash: nobody knows, so none of them is delivered during the reclaim
// grace, and acks, nacks and extensions for them are accepted (clustering.md).
const reclaimConsumer = "\x00reclaim"

// claim records that a consumer extended a message held for the reclaim grace: its lease is a
// real one from now on, and its expiry is a failed attempt like any other.
func (a *actor) claim(id engine.MsgID) {
	if m, ok := a.eng.Get(id); ok && m.Consumer == reclaimConsumer {
		if a.claimed == nil {
			a.claimed = map[engine.MsgID]struct{}{}
		}
		a.claimed[id] = struct{}{}
	}
}

// unclaimed reports whether id's lease is a reclaim hold that no consumer claimed.
func (a *actor) unclaimed(id engine.MsgID) bool {
	m, ok := a.eng.Get(id)
	if !ok || m.Consumer != reclaimConsumer {
		return false
	}
	_, claimed := a.claimed[id]
	return !claimed
}

// recover rebuilds the engine from storage: every message with its attempts, retry time and
// lease. A message's latest known state is whichever of its state record and its lease-log
// entries has the most attempts (the state record on a tie: it was written later). Committed
// leases are restored as they were (an expired one fails on the first round, so it is
// redelivered); a fast queue's pending messages are held for the reclaim grace.
func (a *actor) recover() error {
	now := a.now()
	leases, err := a.recoverLeaseLogs()
	if err != nil {
		return err
	}
	const chunk = 4096
	msgs := make([]engine.Message, 0, chunk)
	var granted []engine.Lease
	fast := !a.committed()
	grace := a.def.ReclaimGraceMs
	if grace == 0 {
		grace = a.b.currentDefaults().ReclaimGraceMs
	}
	flush := func() error {
		if len(msgs) > 0 {
			if err := a.eng.ApplyEnqueue(engine.Enqueue{At: now, Msgs: msgs}); err != nil {
				return err
			}
		}
		for _, l := range granted {
			if err := a.eng.ApplyLease(l); err != nil {
				return err
			}
		}
		msgs, granted = msgs[:0], granted[:0]
		return nil
	}
	err = a.b.db.Messages(a.name, func(sm storage.StoredMessage) error {
		m := engine.Message{
			ID:          engine.MsgID(sm.ID),
			FairnessKey: sm.Body.FairnessKey,
			Weight:      sm.Body.Weight,
			EnqueuedAt:  int64(sm.Body.EnqueuedAt),
			NotBefore:   int64(sm.Body.NotBefore),
		}
		var lease *engine.Lease
		if st := sm.State; st != nil {
			a.p.hasState[m.ID] = struct{}{}
			m.Attempts, m.RedriveCount, m.LastError = st.Attempts, st.RedriveCount, st.LastError
			m.NotBefore = int64(st.NotBefore)
			if st.LeaseExpiresAt > 0 && !fast {
				lease = &engine.Lease{ID: m.ID, Consumer: st.Consumer, LeasedAt: int64(st.LeasedAt), ExpiresAt: int64(st.LeaseExpiresAt)}
			}
		}
		if e, ok := leases[m.ID]; ok && e.entry.Attempts > m.Attempts {
			m.Attempts = e.entry.Attempts
			lease = &engine.Lease{ID: m.ID, Consumer: e.entry.Consumer, LeasedAt: int64(e.entry.LeasedAt), ExpiresAt: int64(e.entry.ExpiresAt)}
			a.p.leaseOf[m.ID] = e.seq
			a.p.leaseLogs[e.seq]++
		}
		if fast && a.def.DLQOf == "" && m.NotBefore <= now {
			// Held, not delivered: the lease below counts an attempt only for a message that
			// had none (the engine cannot lease with zero attempts after it).
			lease = &engine.Lease{ID: m.ID, Consumer: reclaimConsumer, LeasedAt: now, ExpiresAt: addMs(now, grace)}
		}
		if lease != nil {
			// Applying the lease counts the attempt again, and a leased message must be ready.
			m.Attempts = max(m.Attempts, 1) - 1
			m.NotBefore = 0
			granted = append(granted, *lease)
		}
		msgs = append(msgs, m)
		if len(msgs) == chunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if err := a.recoverDedup(); err != nil {
		return err
	}
	return a.dropStaleLeaseLogs(leases)
}

type leaseEntry struct {
	seq   uint64
	entry store.LeaseEntry
}

// recoverLeaseLogs reads every lease log, keeping each message's entry with the most attempts.
func (a *actor) recoverLeaseLogs() (map[engine.MsgID]leaseEntry, error) {
	best := map[engine.MsgID]leaseEntry{}
	err := a.b.db.LeaseLogs(a.name, func(seq uint64, r *store.LeaseLogRecord) error {
		a.p.nextLog = max(a.p.nextLog, seq+1)
		for _, e := range r.Leases {
			id := engine.MsgID(e.ID)
			if cur, ok := best[id]; !ok || e.Attempts > cur.entry.Attempts {
				best[id] = leaseEntry{seq: seq, entry: e}
			}
		}
		return nil
	})
	return best, err
}

// dropStaleLeaseLogs deletes lease logs none of whose entries is current any more.
func (a *actor) dropStaleLeaseLogs(leases map[engine.MsgID]leaseEntry) error {
	stale := map[uint64]bool{}
	for _, e := range leases {
		if a.p.leaseLogs[e.seq] == 0 {
			stale[e.seq] = true
		}
	}
	err := a.b.db.LeaseLogs(a.name, func(seq uint64, _ *store.LeaseLogRecord) error {
		if a.p.leaseLogs[seq] == 0 {
			stale[seq] = true
		}
		return nil
	})
	if err != nil || len(stale) == 0 {
		return err
	}
	b := a.b.db.NewBatch()
	defer b.Close()
	for seq := range stale {
		b.DeleteLeaseLog(a.name, seq)
	}
	return b.Commit(true)
}

// deliveryDurability reads the queue's durability setting.
func (a *actor) deliveryDurability() fibp.DeliveryDurability {
	return fibp.DeliveryDurability(a.def.DeliveryDurability)
}
