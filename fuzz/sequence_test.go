package fuzz

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// requestOps are the opcodes a client may send after its handshake, but for Handshake and
// Disconnect (FuzzFrameStream sends those): the alphabet of FuzzFrameSequence.
var requestOps = func() []fibp.Opcode {
	var ops []fibp.Opcode
	for op := range 256 {
		o := fibp.Opcode(op)
		if o.Known() && o.Direction() != fibp.ServerToClient && o != fibp.OpHandshake && o != fibp.OpDisconnect {
			ops = append(ops, o)
		}
	}
	return ops
}()

// unanswered are the requests the spec gives no response frame.
func unanswered(op fibp.Opcode) bool {
	return op == fibp.OpCredit || op == fibp.OpCancelConsume || op == fibp.OpPong
}

// step is one request of a sequence: [u8 opcode index][u16 body length][body].
type step struct {
	op   fibp.Opcode
	body []byte
}

func readSteps(b []byte) []step {
	var out []step
	for len(b) >= 3 && len(out) < 24 {
		op := requestOps[int(b[0])%len(requestOps)]
		n := min(int(binary.BigEndian.Uint16(b[1:])), len(b)-3)
		out = append(out, step{op, b[3 : 3+n]})
		b = b[3+n:]
	}
	return out
}

func appendStep(b []byte, f fibp.Frame) []byte {
	i := 0
	for requestOps[i] != f.Opcode() {
		i++
	}
	body := f.AppendTo(nil)
	b = append(b, byte(i))
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// itemCount is the number of items of a batch request, for the count its result must have.
func itemCount(f fibp.Frame) (int, bool) {
	switch r := f.(type) {
	case *fibp.Enqueue:
		return len(r.Messages), true
	case *fibp.Ack:
		return len(r.Items), true
	case *fibp.Nack:
		return len(r.Items), true
	case *fibp.ExtendLease:
		return len(r.Items), true
	}
	return 0, false
}

func resultCount(f fibp.Frame) (int, bool) {
	switch r := f.(type) {
	case *fibp.EnqueueResult:
		return len(r.Results), true
	case *fibp.AckResult:
		return len(r.Results), true
	case *fibp.NackResult:
		return len(r.Results), true
	case *fibp.ExtendLeaseResult:
		return len(r.Results), true
	}
	return 0, false
}

// FuzzFrameSequence sends a sequence of well-framed requests of any opcode, in any order, with
// arbitrary bodies (request IDs 1, 2, …) on one handshaken connection of the live server. Each
// request the spec answers must get exactly one answer under its request ID (Deliveries of a
// Consume aside), a batch's result one item per item sent, a request the spec does not answer
// (Credit, CancelConsume, Pong) at most an Error, and nothing may come under an ID not sent; every answer must be a frame of the spec with its error codes. The server may close the
// connection, but must go on serving others.
func FuzzFrameSequence(f *testing.F) {
	a := liveServer(f)
	var all []byte
	for _, fr := range []fibp.Frame{
		&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "q", Payload: []byte("x")}, {Queue: "nope", Payload: []byte("y")}}},
		&fibp.Consume{Queue: "q", Credit: 2}, &fibp.Credit{AdditionalCredit: 3},
		&fibp.Ack{Items: []fibp.AckItem{{Queue: "q"}}}, &fibp.Nack{Items: []fibp.NackItem{{Queue: "q", Error: "e"}, {Queue: "nope"}}},
		&fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "q", ExtendByMs: 10}}}, &fibp.CancelConsume{},
		&fibp.GetStats{Queue: "q"}, &fibp.ListQueues{}, &fibp.CreateQueue{Name: "fz"}, &fibp.UpdateQueue{Queue: "fz"},
		&fibp.Redrive{DLQQueue: "q.dlq"}, &fibp.SetConfig{Key: "scheduler.quantum", Value: "2"}, &fibp.GetConfig{Key: "scheduler.quantum"},
		&fibp.ListConfig{}, &fibp.CreateAPIKey{Name: "k"}, &fibp.ListAPIKeys{}, &fibp.GetACL{KeyID: "key_x"},
		&fibp.GetThrottleStats{}, &fibp.GetRoutes{}, &fibp.GetClusterStatus{}, &fibp.Ping{},
	} {
		one := appendStep(nil, fr)
		f.Add(one)
		all = append(all, one...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, input []byte) {
		steps := readSteps(input)
		if len(steps) == 0 {
			return
		}
		nc, fr := handshaken(t, a)
		defer nc.Close()
		want := map[uint32]fibp.Opcode{}
		errorOnly := map[uint32]fibp.Opcode{} // unanswered requests, which may get one Error (InvalidFrame)
		sent := map[uint32]fibp.Frame{}
		var out []byte
		for i, s := range steps {
			id := uint32(i + 1)
			out = wire.AppendU32(out, uint32(fibp.HeaderSize+len(s.body)))
			out = fibp.Header{Opcode: s.op, RequestID: id}.AppendTo(out)
			out = append(out, s.body...)
			if !unanswered(s.op) {
				want[id] = s.op
			} else {
				errorOnly[id] = s.op
			}
			if req, err := fibp.Decode(s.op, s.body); err == nil {
				sent[id] = req
			}
		}
		go nc.Write(out)
		answered := map[uint32]bool{}
		ended, err := readAnswers(nc, fr, safetyNet, safetyNet, func(h fibp.Header, f fibp.Frame) error {
			id := h.RequestID
			switch {
			case id&(1<<31) != 0:
				return nil // a server-initiated request (Ping)
			case h.Opcode == fibp.OpDelivery:
				if id == 0 || id > uint32(len(steps)) || steps[id-1].op != fibp.OpConsume {
					return fmt.Errorf("a Delivery under request ID %d, which is no Consume", id)
				}
				return nil
			case errorOnly[id] != 0 && h.Opcode == fibp.OpError && !answered[id]:
				answered[id] = true
				return nil
			case want[id] == 0:
				return fmt.Errorf("%v under request ID %d (%v), which asked nothing to be answered", h.Opcode, id, errorOnly[id])
			case answered[id]:
				return fmt.Errorf("a second answer (%v) to request %d (%v)", h.Opcode, id, want[id])
			}
			answered[id] = true
			if n, ok := itemCount(sent[id]); ok {
				if m, isResult := resultCount(f); isResult && m != n {
					return fmt.Errorf("%v of %d items answered with %d results", want[id], n, m)
				}
			}
			return nil
		}, func() bool {
			for id := range want {
				if !answered[id] {
					return false
				}
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if ended == endIdle || ended == endTime {
			for id, op := range want {
				if !answered[id] {
					t.Fatalf("request %d (%v) got no answer, and the connection is still open", id, op)
				}
			}
		}
		liveBroker.CreateQueue(broker.QueueSpec{Name: "q"}) // in case the input deleted it
		alive(t, a)
	})
}
