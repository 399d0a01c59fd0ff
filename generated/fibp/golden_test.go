package fibp

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/filamq/fila/generated/internal/hexvec"
	"github.com/filamq/fila/generated/wire"
)

// The frames' bodies are the spec's examples (spec/fibp.yaml, checked by TestExamples against
// testdata/examples.txt). This vector adds what no body shows: the length prefix and the header.

func TestFrameVector(t *testing.T) {
	var body []byte
	for _, ex := range examples {
		if ex.op == OpError && ex.name == "not-leader" {
			body = hexvec.Bytes(t, ex.hex...)
		}
	}
	want := append(hexvec.Bytes(t,
		"00000032",       // length: 50, header and body
		"fe 00 00000007", // Error, no flags, answering request 7
	), body...)
	fr := &Error{ErrorCode: CodeNotLeader, Message: "not leader", Metadata: map[string]string{MetaLeaderAddr: "127.0.0.1:5556"}}
	if got := AppendFrame(nil, 0, 7, fr); !bytes.Equal(got, want) {
		t.Fatalf("encoding differs\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
	}
	h, rest, err := ParseHeader(want[LengthSize:])
	if err != nil {
		t.Fatal(err)
	}
	if h != (Header{Opcode: OpError, RequestID: 7}) || !bytes.Equal(rest, body) {
		t.Fatalf("header %+v, body %x", h, rest)
	}
	if _, _, err := ParseHeader(want[LengthSize : LengthSize+HeaderSize-1]); err == nil {
		t.Fatal("a truncated header parsed")
	}
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
