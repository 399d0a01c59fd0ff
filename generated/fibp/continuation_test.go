package fibp

import (
	"bytes"
	"errors"
	"testing"

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
