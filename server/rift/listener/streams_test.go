package listener_test

import (
	"testing"
	"time"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"

	"github.com/quic-go/quic-go"
)

// call sends one single-call frame and expects its success answer (OK or STORED).
func call(t testing.TB, c *quic.Conn, fr riftproto.Frame) riftproto.Frame {
	t.Helper()
	s := rt.Open(t, c)
	s.Send(t, fr)
	got, err := s.Next()
	if err != nil {
		t.Fatalf("%T: %v", fr, err)
	}
	if e, ok := got.(*riftproto.Error); ok {
		t.Fatalf("%T %+v: ERROR %v %q", fr, fr, e.Code, e.Message)
	}
	return got
}

func publish(t testing.TB, c *quic.Conn, stream, subj, payload string) *riftproto.Stored {
	t.Helper()
	return call(t, c, &riftproto.StreamPublish{Stream: stream, Subject: subj, Payload: []byte(payload)}).(*riftproto.Stored)
}

func fetch(t testing.TB, c *quic.Conn, stream, name string, limit uint32) []*riftproto.Delivery {
	t.Helper()
	s := rt.Open(t, c)
	s.Send(t, &riftproto.ConsumerFetch{Stream: stream, Name: name, Limit: limit})
	var out []*riftproto.Delivery
	for {
		f, err := s.Next()
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		switch f := f.(type) {
		case *riftproto.Delivery:
			out = append(out, f)
		case *riftproto.Ok:
			return out
		default:
			t.Fatalf("fetch answered %T %+v", f, f)
		}
	}
}

func seqs(ds []*riftproto.Delivery) []uint64 {
	var out []uint64
	for _, d := range ds {
		out = append(out, d.Sequence)
	}
	return out
}

func TestStreamPublishAndErrors(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "reader-token")
	a := publish(t, c, "events", "events.a", "one")
	b := publish(t, c, "events", "events.b", "two")
	if a.Sequence != 1 || b.Sequence != 2 || a.TimestampMillis != uint64(f.clock.Now().UnixMilli()) {
		t.Fatalf("STORED %+v %+v", a, b)
	}
	for _, fr := range []riftproto.Frame{
		&riftproto.StreamPublish{Stream: "nope", Subject: "events.a"},                               // unknown stream
		&riftproto.StreamPublish{Stream: "small", Subject: "events.a"},                              // subject outside the stream
		&riftproto.StreamPublish{Stream: "big", Subject: "big.x", Payload: make([]byte, 65)},        // stream payload limit
		&riftproto.ConsumerOpen{Stream: "events", Name: "bad name", AckWaitMs: 1, MaxAckPending: 1}, // name syntax
		&riftproto.ConsumerOpen{Stream: "events", Name: "c", AckWaitMs: 0, MaxAckPending: 1},        // ack wait range
		&riftproto.ConsumerOpen{Stream: "events", Name: "c", AckWaitMs: 3_600_001, MaxAckPending: 1},
		&riftproto.ConsumerOpen{Stream: "events", Name: "c", AckWaitMs: 1, MaxAckPending: 0}, // pending range
		&riftproto.ConsumerOpen{Stream: "events", Name: "c", AckWaitMs: 1, MaxAckPending: 65_537},
		&riftproto.ConsumerOpen{Stream: "nope", Name: "c", AckWaitMs: 1, MaxAckPending: 1},
		&riftproto.ConsumerFetch{Stream: "events", Name: "missing", Limit: 1},
		&riftproto.ConsumerFetch{Stream: "events", Name: "missing", Limit: 0},
		&riftproto.ConsumerFetch{Stream: "events", Name: "missing", Limit: 257},
		&riftproto.Ack{Stream: "events", Name: "missing", Sequence: 1},
	} {
		s := rt.Open(t, c)
		s.Send(t, fr)
		rt.ExpectError(t, s, riftproto.CodeOperation)
	}
}

func TestStreamRetention(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "reader-token")
	// max_msgs 3: the oldest go first.
	for i := range 5 {
		publish(t, c, "small", "small.x", string(rune('a'+i)))
	}
	call(t, c, &riftproto.ConsumerOpen{Stream: "small", Name: "all", AckWaitMs: 60_000, MaxAckPending: 100})
	if got := seqs(fetch(t, c, "small", "all", 100)); len(got) != 3 || got[0] != 3 || got[2] != 5 {
		t.Fatalf("max_msgs 3 kept %v, want [3 4 5]", got)
	}
	// max_bytes 100 (subject + payload): 4 records of 5+20 bytes fit, the fifth evicts the first.
	for range 5 {
		publish(t, c, "big", "big.x", "01234567890123456789")
	}
	in, _ := f.svc.Streams.Info("big")
	if in.Messages != 4 || in.FirstSequence != 2 || in.Bytes != 100 {
		t.Fatalf("max_bytes: %+v", in)
	}
	// max_age 1m: records older than a minute are removed by the sweep.
	publish(t, c, "aged", "aged.x", "old")
	f.clock.Add(45 * time.Second)
	publish(t, c, "aged", "aged.x", "new")
	f.clock.Add(30 * time.Second)
	f.svc.Streams.Sweep()
	call(t, c, &riftproto.ConsumerOpen{Stream: "aged", Name: "a", AckWaitMs: 60_000, MaxAckPending: 10})
	if ds := fetch(t, c, "aged", "a", 10); len(ds) != 1 || string(ds[0].Payload) != "new" {
		t.Fatalf("max_age left %v", seqs(ds))
	}
}

func TestConsumerRedeliveryAndResumeAcrossRestart(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "reader-token")
	var stored []*riftproto.Stored
	for i, subj := range []string{"events.a", "events.skip", "events.a", "events.a", "events.a"} {
		stored = append(stored, publish(t, c, "events", subj, string(rune('0'+i))))
		f.clock.Add(time.Millisecond)
	}
	open := &riftproto.ConsumerOpen{Stream: "events", Name: "work", Filter: "events.a", StartSequence: 0, AckWaitMs: 1000, MaxAckPending: 2}
	call(t, c, open)
	call(t, c, open) // resume with the same configuration

	// max_ack_pending 2 caps the first fetch; the filter skips sequence 2.
	ds := fetch(t, c, "events", "work", 10)
	if got := seqs(ds); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("first fetch %v, want [1 3]", got)
	}
	if ds[0].DeliveryCount != 1 || ds[0].TimestampMillis != stored[0].TimestampMillis || string(ds[0].Payload) != "0" || ds[0].Subject != "events.a" {
		t.Fatalf("delivery %+v, STORED %+v", ds[0], stored[0])
	}
	if got := fetch(t, c, "events", "work", 10); len(got) != 0 {
		t.Fatalf("fetch at max_ack_pending returned %v", seqs(got))
	}
	call(t, c, &riftproto.Ack{Stream: "events", Name: "work", Sequence: 1})
	call(t, c, &riftproto.Ack{Stream: "events", Name: "work", Sequence: 1}) // idempotent
	for _, seq := range []uint64{2, 5, 99, 0} {                             // filtered out, not yet delivered, never existed
		s := rt.Open(t, c)
		s.Send(t, &riftproto.Ack{Stream: "events", Name: "work", Sequence: seq})
		rt.ExpectError(t, s, riftproto.CodeOperation)
	}
	if got := seqs(fetch(t, c, "events", "work", 10)); len(got) != 1 || got[0] != 4 {
		t.Fatalf("after ack: %v, want [4]", got)
	}

	// Restart: consumer state and records survive; reopening with another config is refused.
	f.restart()
	c = rt.Connect(t, f.addr, "reader-token")
	changed := *open
	changed.AckWaitMs = 2000
	s := rt.Open(t, c)
	s.Send(t, &changed)
	rt.ExpectError(t, s, riftproto.CodeOperation)
	call(t, c, open)
	if got := fetch(t, c, "events", "work", 10); len(got) != 0 {
		t.Fatalf("nothing is due before the ack wait: %v", seqs(got))
	}
	f.clock.Add(1500 * time.Millisecond)
	ds = fetch(t, c, "events", "work", 10)
	if got := seqs(ds); len(got) != 2 || got[0] != 3 || got[1] != 4 || ds[0].DeliveryCount != 2 || ds[1].DeliveryCount != 2 {
		t.Fatalf("redelivery after restart: %+v", ds)
	}
	call(t, c, &riftproto.Ack{Stream: "events", Name: "work", Sequence: 3})
	call(t, c, &riftproto.Ack{Stream: "events", Name: "work", Sequence: 4})
	if got := seqs(fetch(t, c, "events", "work", 10)); len(got) != 1 || got[0] != 5 {
		t.Fatalf("then the last record: %v", got)
	}
	// Sequences never repeat after a restart.
	if st := publish(t, c, "events", "events.a", "6"); st.Sequence != 6 {
		t.Fatalf("sequence after restart %d, want 6", st.Sequence)
	}
}

func TestConsumerStartSequence(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "reader-token")
	for range 4 {
		publish(t, c, "events", "events.a", "x")
	}
	call(t, c, &riftproto.ConsumerOpen{Stream: "events", Name: "late", StartSequence: 3, AckWaitMs: 1000, MaxAckPending: 10})
	if got := seqs(fetch(t, c, "events", "late", 10)); len(got) != 2 || got[0] != 3 {
		t.Fatalf("start_sequence 3: %v", got)
	}
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Ack{Stream: "events", Name: "late", Sequence: 1}) // before the start: never delivered
	rt.ExpectError(t, s, riftproto.CodeOperation)
}
