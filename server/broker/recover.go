package broker

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// reclaimConsumer holds, after a restart, the messages of a fast-durability queue that may have
// been leased before the crash: nobody knows, so none of them is delivered during the reclaim
// grace, and acks, nacks and extensions for them are accepted (clustering.md).
const reclaimConsumer = "\x00reclaim"

// recover rebuilds the engine from storage: every message with its attempts, retry time and
// lease. Committed leases are restored as they were (an expired one fails on the first round, so
// it is redelivered); a fast queue's pending messages are held for the reclaim grace.
func (a *actor) recover() error {
	now := a.now()
	const chunk = 4096
	msgs := make([]engine.Message, 0, chunk)
	var leases []engine.Lease
	fast := !a.committed()
	grace := a.def.ReclaimGraceMs
	if grace == 0 {
		grace = a.b.defaults.ReclaimGraceMs
	}
	flush := func() error {
		if len(msgs) > 0 {
			if err := a.eng.ApplyEnqueue(engine.Enqueue{At: now, Msgs: msgs}); err != nil {
				return err
			}
		}
		for _, l := range leases {
			if err := a.eng.ApplyLease(l); err != nil {
				return err
			}
		}
		msgs, leases = msgs[:0], leases[:0]
		return nil
	}
	err := a.b.db.Messages(a.name, func(sm storage.StoredMessage) error {
		m := engine.Message{
			ID:          engine.MsgID(sm.ID),
			FairnessKey: sm.Body.FairnessKey,
			Weight:      sm.Body.Weight,
			EnqueuedAt:  int64(sm.Body.EnqueuedAt),
			NotBefore:   int64(sm.Body.NotBefore),
		}
		leased := false
		if st := sm.State; st != nil {
			m.Attempts, m.RedriveCount, m.LastError = st.Attempts, st.RedriveCount, st.LastError
			m.NotBefore = int64(st.NotBefore)
			if st.LeaseExpiresAt > 0 && !fast {
				leased = true
				leases = append(leases, engine.Lease{ID: m.ID, Consumer: st.Consumer, LeasedAt: int64(st.LeasedAt), ExpiresAt: int64(st.LeaseExpiresAt)})
			}
		}
		if fast && a.def.DLQOf == "" && m.NotBefore <= now {
			leased = true
			leases = append(leases, engine.Lease{ID: m.ID, Consumer: reclaimConsumer, LeasedAt: now, ExpiresAt: addMs(now, grace)})
		}
		if leased {
			// The lease adds the attempt it already counted; a leased message is ready to lease.
			if m.Attempts > 0 {
				m.Attempts--
			}
			m.NotBefore = 0
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
	return flush()
}

// deliveryDurability reads the queue's durability setting.
func (a *actor) deliveryDurability() fibp.DeliveryDurability {
	return fibp.DeliveryDurability(a.def.DeliveryDurability)
}
