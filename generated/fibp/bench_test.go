package fibp

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/filamq/fila/generated/wire"
)

func deliveryBatch(n int) *Delivery {
	payload := make([]byte, 1024)
	d := &Delivery{}
	for i := range n {
		d.Messages = append(d.Messages, DeliveryMessage{
			MessageID: wire.UUID{byte(i)}, Queue: "orders", Payload: payload, FairnessKey: "tenant-1",
			Weight: 1, AttemptCount: 1, EnqueuedAt: 1700000000000, LeasedAt: 1700000000001, LeaseExpiresAt: 1700000030001,
		})
	}
	return d
}

// TestDecodeDoesNotCopyPayloads checks the zero-copy contract: every decoded payload aliases the
// frame body, and decoding a reused frame allocates only the interned queue name, not per message.
func TestDecodeDoesNotCopyPayloads(t *testing.T) {
	body := orderEnqueue(100).AppendTo(nil)
	var e Enqueue
	if err := e.Decode(body); err != nil {
		t.Fatal(err)
	}
	start, end := uintptr(unsafe.Pointer(&body[0])), uintptr(unsafe.Pointer(&body[len(body)-1]))
	for i, m := range e.Messages {
		p := uintptr(unsafe.Pointer(&m.Payload[0]))
		if p < start || p > end {
			t.Fatalf("payload %d was copied out of the frame", i)
		}
	}
	if allocs := testing.AllocsPerRun(20, func() { _ = e.Decode(body) }); allocs > 1 {
		t.Fatalf("decoding 100 messages into a reused Enqueue allocated %v times", allocs)
	}
}

// TestEncodeIntoRoomyBufferDoesNotAllocate checks that AppendTo allocates only to grow.
func TestEncodeIntoRoomyBufferDoesNotAllocate(t *testing.T) {
	for _, fr := range []Frame{orderEnqueue(100), deliveryBatch(100)} {
		buf := make([]byte, 0, fr.Size()+64)
		if allocs := testing.AllocsPerRun(20, func() { buf = AppendFrame(buf[:0], 0, 1, fr) }); allocs != 0 {
			t.Fatalf("%v: encoding into a buffer with room allocated %v times", fr.Opcode(), allocs)
		}
	}
}

func benchEncode(b *testing.B, fr Frame) {
	buf := make([]byte, 0, fr.Size()+64)
	b.SetBytes(int64(fr.Size()))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], 0, 1, fr)
	}
}

func benchDecode(b *testing.B, fr Frame) {
	body := fr.AppendTo(nil)
	into := New(fr.Opcode())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := into.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDecodeFresh(b *testing.B, fr Frame) {
	body := fr.AppendTo(nil)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(fr.Opcode(), body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCodec(b *testing.B) {
	for _, fr := range []Frame{orderEnqueue(100), deliveryBatch(100)} {
		name := fmt.Sprintf("%v/100x1KB", fr.Opcode())
		b.Run(name+"/encode", func(b *testing.B) { benchEncode(b, fr) })
		b.Run(name+"/decode-reuse", func(b *testing.B) { benchDecode(b, fr) })
		b.Run(name+"/decode-fresh", func(b *testing.B) { benchDecodeFresh(b, fr) })
	}
}
