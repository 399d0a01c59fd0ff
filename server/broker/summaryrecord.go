package broker

import (
	"encoding/json"
	"fmt"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/raftstore"
)

// A sleeping group's summary is stored as a store.QueueSummaryRecord, its opcode first, under
// summaryKey in the group's stable store (hibernate.go). Releases before the record stored it as
// JSON: a start still reads that form, so that an upgrade finds its idle groups asleep, and
// stores it again as a record; nothing writes JSON.

// encodeSummary returns s as stored.
func encodeSummary(s *summary) []byte {
	rec := store.QueueSummaryRecord{Index: s.Index, Wakes: s.Wakes, WakeAt: s.WakeAt, Lanes: make([]store.LaneSummary, len(s.Lanes))}
	for l := range s.Lanes {
		rec.Lanes[l] = laneRecord(&s.Lanes[l])
	}
	b := make([]byte, 0, 1+rec.Size())
	b = append(b, byte(rec.Opcode()))
	return rec.AppendTo(b)
}

// decodeSummary reads a stored summary; legacy reports that it was in the JSON form of releases
// before the record.
func decodeSummary(raw []byte) (s summary, legacy bool, err error) {
	if len(raw) > 0 && raw[0] == '{' {
		s, err = decodeJSONSummary(raw)
		return s, true, err
	}
	var rec store.QueueSummaryRecord
	if len(raw) == 0 || store.Opcode(raw[0]) != rec.Opcode() {
		return summary{}, false, fmt.Errorf("broker: a stored summary is not a %v", rec.Opcode())
	}
	if err := rec.Decode(raw[1:]); err != nil {
		return summary{}, false, fmt.Errorf("broker: a stored summary: %w", err)
	}
	if len(rec.Lanes) != len(s.Lanes) {
		return summary{}, false, fmt.Errorf("broker: a stored summary has %d lanes, want %d", len(rec.Lanes), len(s.Lanes))
	}
	s = summary{Index: rec.Index, Wakes: rec.Wakes, WakeAt: rec.WakeAt}
	for l := range s.Lanes {
		s.Lanes[l] = laneFromRecord(&rec.Lanes[l])
	}
	return s, false, nil
}

// decodeJSONSummary reads the JSON form: summary's Go fields by name, engine.Stats's inside.
func decodeJSONSummary(raw []byte) (summary, error) {
	var s summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return summary{}, fmt.Errorf("broker: a stored summary (JSON): %w", err)
	}
	return s, nil
}

// putSummary stores s (stamped) in a group's stable store, without an fsync of its own where
// the store can.
func putSummary(logs raftstore.LogStableStore, s *summary) error {
	b := encodeSummary(s)
	if u, ok := logs.(unsyncedSetter); ok {
		return u.SetUnsynced(summaryKey, b)
	}
	return logs.Set(summaryKey, b)
}

func laneRecord(ls *laneSummary) store.LaneSummary {
	st := &ls.Stats
	r := store.LaneSummary{
		Depth: st.Depth, InFlight: st.InFlight, Delayed: st.Delayed, Held: st.Held, Throttled: st.Throttled,
		Unclassified: st.Unclassified, OldestUnclassifiedAt: st.OldestUnclassifiedAt,
		ActiveFairnessKeys: st.ActiveFairnessKeys, ActiveConsumers: st.ActiveConsumers, Quantum: st.Quantum,
		OrderingGroups: st.OrderingGroups, BlockedGroups: st.BlockedGroups,
		Oldest: ls.Oldest, HasOldest: ls.HasOldest,
	}
	if len(st.Keys) > 0 {
		r.Keys = make([]store.KeySummary, len(st.Keys))
		for i, k := range st.Keys {
			r.Keys[i] = store.KeySummary{Key: k.Key, Pending: k.Pending, Deficit: k.Deficit, Weight: k.Weight}
		}
	}
	return r
}

func laneFromRecord(r *store.LaneSummary) laneSummary {
	ls := laneSummary{Stats: engine.Stats{
		Depth: r.Depth, InFlight: r.InFlight, Delayed: r.Delayed, Held: r.Held, Throttled: r.Throttled,
		Unclassified: r.Unclassified, OldestUnclassifiedAt: r.OldestUnclassifiedAt,
		ActiveFairnessKeys: r.ActiveFairnessKeys, ActiveConsumers: r.ActiveConsumers, Quantum: r.Quantum,
		OrderingGroups: r.OrderingGroups, BlockedGroups: r.BlockedGroups,
	}, Oldest: r.Oldest, HasOldest: r.HasOldest}
	if len(r.Keys) > 0 {
		ls.Stats.Keys = make([]engine.KeyStats, len(r.Keys))
		for i, k := range r.Keys {
			ls.Stats.Keys[i] = engine.KeyStats{Key: k.Key, Pending: k.Pending, Deficit: k.Deficit, Weight: k.Weight}
		}
	}
	return ls
}
