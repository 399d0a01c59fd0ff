package riftproto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/filamq/fila/generated/internal/hexvec"
	"github.com/filamq/fila/generated/wire"
)

// Golden vectors: every Rift frame laid out by hand from rift.md, one commented line per field.
// [u32 body_length][u8 opcode][fields]; the length counts the opcode.

var t0 = hexvec.Text

func TestGoldenFrames(t *testing.T) {
	cases := []struct {
		name  string
		frame Frame
		hex   []string
	}{
		{"Auth", &Auth{Token: "s3cret"}, []string{
			"00000009",             // length 9
			"01",                   // AUTH
			"0006 " + t0("s3cret"), // token
		}},
		{"Ok", &Ok{}, []string{"00000001", "02"}},
		{"Error", &Error{Code: CodePermission, Message: "denied"}, []string{
			"0000000b",             // length 11
			"03",                   // ERROR
			"0001",                 // code 1 = permission
			"0006 " + t0("denied"), // message
		}},
		{"Publish", &Publish{Subject: "a.b", Payload: []byte("hi")}, []string{
			"0000000a",          // length 10
			"04",                // PUBLISH
			"0003 " + t0("a.b"), // subject
			"0000",              // reply: absent
			"6869",              // payload: the rest of the frame
		}},
		{"PublishAck", &PublishAck{Subject: "a.b", Reply: "_INBOX.x", Payload: nil}, []string{
			"00000010",               // length 16
			"05",                     // PUBLISH_ACK
			"0003 " + t0("a.b"),      // subject
			"0008 " + t0("_INBOX.x"), // reply
		}},
		{"Subscribe", &Subscribe{Pattern: "game.*", Queue: "workers"}, []string{
			"00000012",              // length 18
			"06",                    // SUBSCRIBE
			"0006 " + t0("game.*"),  // pattern
			"0007 " + t0("workers"), // queue group
		}},
		{"Message", &Message{Subject: "a", Reply: "r", Payload: []byte{0}}, []string{
			"00000008", // length 8
			"07",       // MESSAGE
			"0001 61",  // subject "a"
			"0001 72",  // reply "r"
			"00",       // payload: one zero byte
		}},
		{"Ping", &Ping{}, []string{"00000001", "08"}},
		{"Request", &Request{TimeoutMs: 1000, Subject: "svc", Payload: []byte("q")}, []string{
			"0000000b",          // length 11
			"09",                // REQUEST
			"000003e8",          // timeout_ms 1000
			"0003 " + t0("svc"), // subject
			"71",                // payload "q"
		}},
		{"StreamPublish", &StreamPublish{Stream: "events", Subject: "events.x", Payload: []byte("p")}, []string{
			"00000016",               // length 22
			"0a",                     // STREAM_PUBLISH
			"0006 " + t0("events"),   // stream
			"0008 " + t0("events.x"), // subject
			"0000",                   // reply: absent
			"70",                     // payload "p"
		}},
		{"Stored", &Stored{Sequence: 42, TimestampMillis: 1700000000000}, []string{
			"00000011",         // length 17
			"0b",               // STORED
			"000000000000002a", // sequence 42
			"0000018bcfe56800", // timestamp_millis 1700000000000
		}},
		{"ConsumerOpen", &ConsumerOpen{Stream: "events", Name: "c1", Filter: "events.>", StartSequence: 1, AckWaitMs: 30000, MaxAckPending: 100}, []string{
			"00000027",               // length 39
			"0c",                     // CONSUMER_OPEN
			"0006 " + t0("events"),   // stream
			"0002 " + t0("c1"),       // name
			"0008 " + t0("events.>"), // filter
			"0000000000000001",       // start_sequence 1
			"00007530",               // ack_wait_ms 30000
			"00000064",               // max_ack_pending 100
		}},
		{"ConsumerFetch", &ConsumerFetch{Stream: "events", Name: "c1", Limit: 10}, []string{
			"00000011",             // length 17
			"0d",                   // CONSUMER_FETCH
			"0006 " + t0("events"), // stream
			"0002 " + t0("c1"),     // name
			"0000000a",             // limit 10
		}},
		{"Delivery", &Delivery{Sequence: 7, TimestampMillis: 1700000000000, DeliveryCount: 2, Subject: "events.x", Payload: []byte("p")}, []string{
			"00000022",               // length 34
			"0e",                     // DELIVERY
			"0000000000000007",       // sequence 7
			"0000018bcfe56800",       // timestamp_millis
			"00000002",               // delivery_count 2
			"0008 " + t0("events.x"), // subject
			"0000",                   // reply: absent
			"70",                     // payload "p"
		}},
		{"Ack", &Ack{Stream: "events", Name: "c1", Sequence: 7}, []string{
			"00000015",             // length 21
			"0f",                   // ACK
			"0006 " + t0("events"), // stream
			"0002 " + t0("c1"),     // name
			"0000000000000007",     // sequence 7
		}},
	}
	if len(cases) != 15 {
		t.Fatalf("%d vectors, want one per Rift frame (15)", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := hexvec.Bytes(t, tc.hex...)
			got := AppendFrame(nil, tc.frame)
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding differs\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
			}
			dec, err := Decode(Opcode(want[4]), want[5:])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.frame, dec, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("decoded frame differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRejectsTrailingBytesOnFixedLayouts(t *testing.T) {
	body := (&Stored{Sequence: 1}).AppendTo(nil)
	err := new(Stored).Decode(append(body, 0))
	if !errors.Is(err, wire.ErrTrailing) {
		t.Fatalf("got %v, want ErrTrailing", err)
	}
}

func TestLimits(t *testing.T) {
	long := func(n int) string { return string(bytes.Repeat([]byte("a"), n)) }
	for _, tc := range []struct {
		name string
		op   Opcode
		body []byte
		want error
	}{
		{"subject of 1,025 bytes", OpPublish, (&Publish{Subject: long(1025)}).AppendTo(nil), wire.ErrTooLong},
		{"subject of 1,024 bytes", OpPublish, (&Publish{Subject: long(1024)}).AppendTo(nil), nil},
		{"queue of 4,097 bytes", OpSubscribe, (&Subscribe{Pattern: "a", Queue: long(4097)}).AppendTo(nil), wire.ErrTooLong},
		{"invalid UTF-8", OpPublish, (&Publish{Subject: "a\xff"}).AppendTo(nil), wire.ErrInvalidUTF8},
		{"payload of 1 MiB + 1", OpPublish, (&Publish{Subject: "a", Payload: make([]byte, 1<<20+1)}).AppendTo(nil), wire.ErrTooLong},
		{"payload of 1 MiB", OpPublish, (&Publish{Subject: "a", Payload: make([]byte, 1<<20)}).AppendTo(nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.op, tc.body)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if got := OpAuth.MaxBody(); got != 4099 {
		t.Fatalf("AUTH body limit %d, want 4,099", got)
	}
	if got := OpPublish.MaxBody(); got != 1114112 {
		t.Fatalf("PUBLISH body limit %d, want 1,114,112", got)
	}
}
