package transport

import (
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// Consumes run beside the reader; what names a subscription still sees it as the client sent it.
// Pipelined on one connection: a Consume that fails frees its request ID and its place under
// MaxSubscriptions for the Consume behind it; a Credit and a CancelConsume act on the
// subscription their Consume made; one subscription over the bound is refused.
func TestPipelinedConsumesKeepTheirOrderForWhatNamesThem(t *testing.T) {
	_, addr := startServer(t, Options{MaxSubscriptions: 2})
	c := dialRaw(t, addr)
	c.Handshake()
	for i, q := range []string{"q", "r", "empty"} {
		if r := c.Call(uint32(i+1), &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
	}
	msgs := []fibp.EnqueueMessage{{Queue: "q", Payload: []byte("a")}, {Queue: "q", Payload: []byte("b")}, {Queue: "r", Payload: []byte("c")}}
	if r := c.Call(5, &fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("Enqueue: %+v", r)
	}
	c.Send(10, &fibp.Consume{Queue: "absent", Credit: 1}) // fails: QueueNotFound
	c.Send(10, &fibp.Consume{Queue: "q", Credit: 1})      // the same ID again: allowed once the first failed
	c.Send(10, &fibp.Credit{AdditionalCredit: 1})         // for the second: q's other message
	c.Send(11, &fibp.Consume{Queue: "empty", Credit: 1})
	c.Send(12, &fibp.Consume{Queue: "r", Credit: 1}) // a third: over the bound of 2
	c.Send(11, &fibp.CancelConsume{})
	c.Send(13, &fibp.Consume{Queue: "r", Credit: 1}) // in 11's place
	want := []struct {
		id uint32
		op fibp.Opcode
	}{{10, fibp.OpError}, {10, fibp.OpConsumeOk}, {10, fibp.OpDelivery}, {10, fibp.OpDelivery}, {11, fibp.OpConsumeOk}, {12, fibp.OpError}, {13, fibp.OpConsumeOk}, {13, fibp.OpDelivery}}
	got := map[uint32][]fibp.Opcode{}
	for range want {
		h, f := c.Next()
		if e, ok := f.(*fibp.Error); ok {
			switch {
			case h.RequestID == 10 && e.ErrorCode != fibp.CodeQueueNotFound, h.RequestID == 12 && e.ErrorCode != fibp.CodeChannelFull:
				t.Fatalf("request %d refused %v (%s)", h.RequestID, e.ErrorCode, e.Message)
			}
		}
		got[h.RequestID] = append(got[h.RequestID], f.Opcode())
	}
	for i, w := range want {
		ops := got[w.id]
		if len(ops) == 0 || ops[0] != w.op {
			t.Fatalf("answer %d: request %d got %v, want %v next (all: %v)", i, w.id, ops, w.op, got)
		}
		got[w.id] = ops[1:]
	}
}
