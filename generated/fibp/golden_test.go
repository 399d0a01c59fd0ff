package fibp

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/filamq/fila/generated/internal/hexvec"
	"github.com/filamq/fila/generated/wire"
)

// Golden vectors: byte layouts computed by hand from the FIBP spec, one commented line per field.
// Each vector is checked both ways: the frame encodes to exactly these bytes, and the bytes decode
// to exactly this frame.

func checkVector(t *testing.T, flags FrameFlags, reqID uint32, fr Frame, want []byte) {
	t.Helper()
	got := AppendFrame(nil, flags, reqID, fr)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding differs\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
	}
	if n := int(want[0])<<24 | int(want[1])<<16 | int(want[2])<<8 | int(want[3]); n != len(want)-4 {
		t.Fatalf("vector length prefix %d, body %d", n, len(want)-4)
	}
	h, body, err := ParseHeader(want[4:])
	if err != nil {
		t.Fatal(err)
	}
	if h.Opcode != fr.Opcode() || h.Flags != flags || h.RequestID != reqID {
		t.Fatalf("header %+v", h)
	}
	dec, err := Decode(h.Opcode, body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fr, dec); diff != "" {
		t.Fatalf("decoded frame differs (-want +got):\n%s", diff)
	}
}

func TestGoldenHandshake(t *testing.T) {
	want := hexvec.Bytes(t,
		"00000012",                    // length: 18
		"01",                          // opcode Handshake
		"00",                          // flags
		"00000000",                    // request_id 0 (reserved for the handshake)
		"0001",                        // protocol_version 1
		"01 0003 "+hexvec.Text("key"), // api_key: present, "key"
		"00000001",                    // client_capabilities: CREDIT_FLOW_CONTROL
	)
	checkVector(t, 0, 0, &Handshake{ProtocolVersion: 1, APIKey: wire.Some("key"), ClientCapabilities: CapCreditFlowControl}, want)
}

func TestGoldenHandshakeOk(t *testing.T) {
	want := hexvec.Bytes(t,
		"00000018",         // length: 24
		"02 00 00000000",   // HandshakeOk, request 0
		"0001",             // negotiated_version 1
		"0000000000000000", // node_id 0 (single node)
		"01000000",         // max_frame_size 16 MiB
		"00000001",         // server_capabilities
	)
	checkVector(t, 0, 0, &HandshakeOk{NegotiatedVersion: 1, MaxFrameSize: 16 << 20, ServerCapabilities: CapCreditFlowControl}, want)
}

func TestGoldenErrorWithMetadata(t *testing.T) {
	want := hexvec.Bytes(t,
		"00000032",                            // length: 50
		"fe 00 00000007",                      // Error, answering request 7
		"0c",                                  // error_code NotLeader
		"000a "+hexvec.Text("not leader"),     // message
		"0001",                                // metadata: 1 entry
		"000b "+hexvec.Text("leader_addr"),    //   key
		"000e "+hexvec.Text("127.0.0.1:5556"), // value
	)
	checkVector(t, 0, 7, &Error{
		ErrorCode: CodeNotLeader,
		Message:   "not leader",
		Metadata:  map[string]string{MetaLeaderAddr: "127.0.0.1:5556"},
	}, want)
}

func TestGoldenDelivery(t *testing.T) {
	want := hexvec.Bytes(t,
		"00000058",                         // length: 88
		"14 00 00000003",                   // Delivery on Consume request 3
		"00000001",                         // message_count 1
		"0102030405060708090a0b0c0d0e0f10", // message_id
		"0001 71",                          // queue "q"
		"0001 0001 68 0001 76",             // headers {"h": "v"}
		"00000002 6869",                    // payload "hi"
		"0007 "+hexvec.Text("default"),     // fairness_key
		"00000001",                         // weight 1
		"00000001",                         // attempt_count 1
		"00000000",                         // redrive_count 0
		"0000018bcfe56800",                 // enqueued_at 1700000000000
		"0000018bcfe569f4",                 // leased_at 1700000000500
		"0000018bcfe5df24",                 // lease_expires_at 1700000030500
	)
	checkVector(t, 0, 3, &Delivery{Messages: []DeliveryMessage{{
		MessageID:      wire.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Queue:          "q",
		Headers:        map[string]string{"h": "v"},
		Payload:        []byte("hi"),
		FairnessKey:    "default",
		Weight:         1,
		AttemptCount:   1,
		EnqueuedAt:     1700000000000,
		LeasedAt:       1700000000500,
		LeaseExpiresAt: 1700000030500,
	}}}, want)
}

func TestGoldenGetStatsResultWithThrottle(t *testing.T) {
	want := hexvec.Bytes(t,
		"000000c4",                     // length: 196
		"f8 00 00000009",               // GetStatsResult answering request 9
		"00",                           // error_code Ok
		"0000000000000005",             // depth 5
		"0000000000000001",             // in_flight 1
		"0000000000000000",             // delayed
		"0000000000000000",             // unclassified
		"0000000000000000",             // oldest_unclassified_at
		"0000000000000002",             // throttled 2
		"0000000000000001",             // active_fairness_keys 1
		"00000001",                     // active_consumers 1
		"00000001",                     // quantum 1
		"0000000000000000",             // leader_node_id 0
		"00000000",                     // replication_count 0
		"00000001",                     // per_key_stats_count 1
		"0007 "+hexvec.Text("default"), //   key
		"0000000000000005",             //   pending_count 5
		"ffffffffffffffff",             //   current_deficit -1
		"00000001",                     //   weight 1
		"00000001",                     // active_throttle_count 1
		"0003 "+hexvec.Text("api"),     //   throttle_summary.name
		"0001",                         //   limit_count 1
		"0000000000000064",             //     max_deliveries 100
		"00000000000003e8",             //     window_ms 1000
		"0001 00 0008 "+hexvec.Text("merchant"), // key: 1 part, header "merchant"
		"00",       //   when_key_missing: shared bucket
		"00000002", //   declaring_subscribers 2
		"0001",     // settings: 1 entry (appended field)
		"000c "+hexvec.Text("max_attempts")+" 0001 "+hexvec.Text("5"),
		"0000000000000003", // ordering_groups 3 (appended field)
		"0000000000000001", // ordering_groups_blocked 1 (appended field)
	)
	checkVector(t, 0, 9, &GetStatsResult{
		Depth: 5, InFlight: 1, Throttled: 2, ActiveFairnessKeys: 1, ActiveConsumers: 1, Quantum: 1,
		PerKeyStats:    []FairnessKeyStat{{Key: "default", PendingCount: 5, CurrentDeficit: -1, Weight: 1}},
		Settings:       map[string]string{"max_attempts": "5"},
		OrderingGroups: 3, OrderingGroupsBlocked: 1,
		ActiveThrottles: []ThrottleSummary{{
			Name:                 "api",
			Limits:               []ThrottleLimit{{MaxDeliveries: 100, WindowMs: 1000}},
			Key:                  Key{{Kind: KeyPartKindHeader, Name: "merchant"}},
			DeclaringSubscribers: 2,
		}},
	}, want)
}

// The spec's overhead analysis, reproduced exactly.

func orderEnqueue(n int) *Enqueue {
	payload := make([]byte, 1024)
	e := &Enqueue{}
	for range n {
		e.Messages = append(e.Messages, EnqueueMessage{Queue: "orders", Payload: payload})
	}
	return e
}

func TestOverheadSingleEnqueue(t *testing.T) {
	if got := len(AppendFrame(nil, 0, 1, orderEnqueue(1))); got != 1056 {
		t.Fatalf("single 1 KB Enqueue is %d bytes on the wire, spec says 1056", got)
	}
}

func TestOverheadBatchEnqueue(t *testing.T) {
	if got := len(AppendFrame(nil, 0, 1, orderEnqueue(100))); got != 104214 {
		t.Fatalf("100 x 1 KB Enqueue is %d bytes on the wire, spec says 104,214", got)
	}
}

func TestOverheadAck(t *testing.T) {
	item := AckItem{Queue: "orders", MessageID: wire.UUID{1}}
	if got := item.Size(); got != 24 {
		t.Fatalf("ack item is %d bytes, spec says 24", got)
	}
	ack := &Ack{Items: make([]AckItem, 1000)}
	for i := range ack.Items {
		ack.Items[i] = item
	}
	if got := ack.Size() - 4; got != 24000 { // less the u32 item count
		t.Fatalf("1,000 ack items are %d bytes, spec says 24,000", got)
	}
}
