package fibp

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/filamq/fila/generated/wire"
)

// readFrames splits a stream of frames into headers and bodies.
func readFrames(t *testing.T, stream []byte, maxFrame int) ([]Header, [][]byte) {
	t.Helper()
	fr := wire.NewFrameReader(bytes.NewReader(stream), HeaderSize, maxFrame)
	var hs []Header
	var bodies [][]byte
	for {
		body, err := fr.Next()
		if err != nil {
			return hs, bodies
		}
		h, rest, err := ParseHeader(body)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		bodies = append(bodies, append([]byte(nil), rest...))
	}
}

func TestContinuationSplitAndReassemble(t *testing.T) {
	enq := orderEnqueue(10) // about 10 KB
	body := enq.AppendTo(nil)
	const maxFrame = 1000
	stream := AppendContinued(nil, OpEnqueue, 5, body, maxFrame)
	hs, chunks := readFrames(t, stream, maxFrame)
	if len(hs) != (len(body)+maxFrame-HeaderSize-1)/(maxFrame-HeaderSize) {
		t.Fatalf("%d frames for %d bytes", len(hs), len(body))
	}
	var r Reassembler
	for i, h := range hs {
		last := i == len(hs)-1
		if h.Flags.Has(FlagContinuation) == last || h.Opcode != OpEnqueue || h.RequestID != 5 {
			t.Fatalf("frame %d header %+v", i, h)
		}
		got, done, err := r.Add(h, chunks[i])
		if err != nil || done != last {
			t.Fatalf("frame %d: done %v err %v", i, done, err)
		}
		if last {
			var dec Enqueue
			if err := dec.Decode(got); err != nil || len(dec.Messages) != 10 {
				t.Fatalf("reassembled body: %v, %d messages", err, len(dec.Messages))
			}
		}
	}
	if r.Pending() != 0 {
		t.Fatalf("%d partial bodies left", r.Pending())
	}
}

func TestContinuationFitsInOneFrame(t *testing.T) {
	stream := AppendContinued(nil, OpPing, 9, (&Ping{}).AppendTo(nil), 0)
	if want := AppendFrame(nil, 0, 9, &Ping{}); !bytes.Equal(stream, want) {
		t.Fatalf("got %x want %x", stream, want)
	}
	var r Reassembler
	body := []byte{1, 2}
	got, done, err := r.Add(Header{Opcode: OpAck, RequestID: 1}, body)
	if !done || err != nil || &got[0] != &body[0] {
		t.Fatal("a plain frame must pass through without a copy")
	}
}

func TestContinuationInterleavedAndLimits(t *testing.T) {
	r := Reassembler{MaxBody: 10, MaxPartials: 2}
	cont := func(id uint32, op Opcode) Header { return Header{Opcode: op, Flags: FlagContinuation, RequestID: id} }
	if _, _, err := r.Add(cont(1, OpEnqueue), []byte("aaaa")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Add(cont(2, OpAck), []byte("bb")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Add(cont(3, OpAck), []byte("c")); !errors.Is(err, ErrTooManyPartials) {
		t.Fatalf("third partial: %v", err)
	}
	got, done, err := r.Add(Header{Opcode: OpAck, RequestID: 2}, []byte("B"))
	if !done || err != nil || string(got) != "bbB" {
		t.Fatalf("request 2: %q %v %v", got, done, err)
	}
	if _, _, err := r.Add(cont(1, OpEnqueue), []byte("aaaaaaa")); !errors.Is(err, ErrReassemblyTooLarge) {
		t.Fatalf("oversized reassembly: %v", err)
	}
	if _, _, err := r.Add(cont(4, OpEnqueue), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Add(Header{Opcode: OpAck, RequestID: 4}, []byte("y")); !errors.Is(err, ErrReassemblyOpcode) {
		t.Fatalf("opcode change: %v", err)
	}
	if r.Pending() != 0 {
		t.Fatalf("%d partial bodies left after errors", r.Pending())
	}
}

// countingBudget is a wire.BufferBudget with a limit, for the reassembler's accounting.
type countingBudget struct{ used, limit int }

func (b *countingBudget) Grow(n int) error {
	if b.used+n > b.limit {
		return errors.New("budget full")
	}
	b.used += n
	return nil
}

func (b *countingBudget) Shrink(n int) { b.used -= n }

func TestReassemblyBudgetAndExpiry(t *testing.T) {
	budget := &countingBudget{limit: 100}
	r := Reassembler{Budget: budget}
	cont := Header{Opcode: OpEnqueue, Flags: FlagContinuation, RequestID: 1}
	t0 := time.Unix(1000, 0)
	if _, _, err := r.AddAt(cont, make([]byte, 40), t0); err != nil {
		t.Fatal(err)
	}
	if budget.used < 40 {
		t.Fatalf("a 40-byte partial charged %d bytes", budget.used)
	}
	if _, _, err := r.AddAt(cont, make([]byte, 70), t0); err == nil {
		t.Fatal("a partial past the budget was accepted")
	}
	if budget.used != 0 || r.Pending() != 0 {
		t.Fatalf("after a refusal: %d bytes charged, %d partials", budget.used, r.Pending())
	}
	// A completed body stays charged until Release.
	_, _, _ = r.AddAt(cont, []byte("ab"), t0)
	body, done, err := r.AddAt(Header{Opcode: OpEnqueue, RequestID: 1}, []byte("c"), t0)
	if !done || err != nil || string(body) != "abc" || budget.used == 0 {
		t.Fatalf("completed: %q %v %v, %d charged", body, done, err, budget.used)
	}
	r.Release()
	if budget.used != 0 {
		t.Fatalf("%d bytes charged after Release", budget.used)
	}
	// An idle partial expires; a recent one stays.
	_, _, _ = r.AddAt(Header{Opcode: OpAck, Flags: FlagContinuation, RequestID: 2}, []byte("x"), t0)
	_, _, _ = r.AddAt(Header{Opcode: OpAck, Flags: FlagContinuation, RequestID: 3}, []byte("y"), t0.Add(time.Minute))
	if ids := r.Expire(t0.Add(time.Second), nil); len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("expired %v, want [2]", ids)
	}
	r.Close()
	if budget.used != 0 || r.Pending() != 0 {
		t.Fatalf("after Close: %d bytes charged, %d partials", budget.used, r.Pending())
	}
}
