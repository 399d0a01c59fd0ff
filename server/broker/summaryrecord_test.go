package broker

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/queuegroup"
)

// A summary comes back from its record with every counter: each field of engine.Stats is set
// (by reflection, so that a field added to Stats and not to the record fails here).
func TestASummaryRecordKeepsEveryCounter(t *testing.T) {
	n := 0
	var s summary
	fill(t, reflect.ValueOf(&s).Elem(), &n)
	raw := encodeSummary(&s)
	if store.Opcode(raw[0]) != store.OpQueueSummaryRecord {
		t.Fatalf("stored as %x…, want the record's opcode first", raw[:1])
	}
	got, legacy, err := decodeSummary(raw)
	if err != nil || legacy {
		t.Fatalf("decode: legacy %v, %v", legacy, err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Fatalf("the record lost something (-stored +read):\n%s", diff)
	}
}

// fill sets every field under v to a value of its own, counting with n.
func fill(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), n)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fill(t, v.Index(i), n)
		}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(-int64(*n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("key " + string(rune('a'+*n%26)))
	default:
		t.Fatalf("fill: a %v (%s) the summary record may not hold", v.Kind(), v.Type())
	}
}

// legacySummary is a summary as releases before QueueSummaryRecord stored it (JSON).
const legacySummary = `{"Index":42,"Wakes":true,"WakeAt":1700000005000,"Lanes":[` +
	`{"Stats":{"Depth":3,"InFlight":1,"Delayed":1,"Held":0,"Throttled":0,"Unclassified":0,"OldestUnclassifiedAt":0,"ActiveFairnessKeys":2,"ActiveConsumers":0,"Quantum":1000,"OrderingGroups":0,"BlockedGroups":0,` +
	`"Keys":[{"Key":"a","Pending":1,"Deficit":500,"Weight":1},{"Key":"b","Pending":1,"Deficit":0,"Weight":2}]},"Oldest":1700000000000,"HasOldest":true},` +
	`{"Stats":{"Depth":1,"InFlight":0,"Delayed":0,"Held":0,"Throttled":0,"Unclassified":0,"OldestUnclassifiedAt":0,"ActiveFairnessKeys":0,"ActiveConsumers":0,"Quantum":1000,"OrderingGroups":0,"BlockedGroups":0,` +
	`"Keys":[{"Key":"c","Pending":0,"Deficit":0,"Weight":1}]},"Oldest":0,"HasOldest":false}]}`

func TestALegacyJSONSummaryIsRead(t *testing.T) {
	got, legacy, err := decodeSummary([]byte(legacySummary))
	if err != nil || !legacy {
		t.Fatalf("decode: legacy %v, %v", legacy, err)
	}
	want := summary{Index: 42, Wakes: true, WakeAt: 1_700_000_005_000, Lanes: [2]laneSummary{
		{Stats: engine.Stats{Depth: 3, InFlight: 1, Delayed: 1, ActiveFairnessKeys: 2, Quantum: 1000,
			Keys: []engine.KeyStats{{Key: "a", Pending: 1, Deficit: 500, Weight: 1}, {Key: "b", Pending: 1, Weight: 2}}},
			Oldest: 1_700_000_000_000, HasOldest: true},
		{Stats: engine.Stats{Depth: 1, Quantum: 1000, Keys: []engine.KeyStats{{Key: "c", Weight: 1}}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	for _, raw := range []string{"", "\x07", "{", "\x01\x00"} {
		if _, _, err := decodeSummary([]byte(raw)); err == nil {
			t.Errorf("%q decodes as a summary", raw)
		}
	}
}

// A data directory written before QueueSummaryRecord holds its sleeping groups' summaries as
// JSON: the upgraded broker registers them asleep from it as before, and stores it again as a
// record, so that the next start reads the record.
func TestAnUpgradedStartReadsTheJSONSummaryOnce(t *testing.T) {
	s, b := asleepWithOne(t)
	b.Close()
	logs, _, err := s.mem.QueueLog("q", queuegroup.Bodies{})
	if err != nil {
		t.Fatal(err)
	}
	stored := func() []byte {
		t.Helper()
		raw, err := logs.Get(summaryKey)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	raw := stored()
	sum, legacy, err := decodeSummary(raw)
	if err != nil || legacy {
		t.Fatalf("the summary a group stores: legacy %v, %v", legacy, err)
	}
	old, err := json.Marshal(&sum) // as the release before the record stored it
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Set(summaryKey, old); err != nil {
		t.Fatal(err)
	}

	b = s.openIdle(t, time.Second)
	if n := b.AwakeQueues(); n != 0 {
		t.Fatalf("%d queues awake after a start on a JSON summary, want q asleep", n)
	}
	if st, e := b.GetStats("q"); e != nil || st.Depth != 1 {
		t.Fatalf("stats from the JSON summary: %+v %v", st, e)
	}
	again, legacy, err := decodeSummary(stored())
	if err != nil || legacy {
		t.Fatalf("after the start the summary is stored with legacy %v, %v; want the record", legacy, err)
	}
	if diff := cmp.Diff(sum, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("the summary stored again differs (-before +after):\n%s", diff)
	}
	b.Close()
	b = s.openIdle(t, time.Second)
	if n := b.AwakeQueues(); n != 0 {
		t.Fatalf("%d queues awake after a start on the record, want q asleep", n)
	}
}
