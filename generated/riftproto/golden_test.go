package riftproto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/filamq/fila/generated/internal/hexvec"
	"github.com/filamq/fila/generated/wire"
)

// The frames' bodies are the spec's examples (spec/rift.yaml, laid out by hand from rift.md and
// checked by TestExamples against testdata/examples.txt). This test adds the framing: every frame
// is [u32 body_length][u8 opcode][body], the length counting the opcode, and every opcode has an
// example.
func TestFramesAroundExamples(t *testing.T) {
	seen := map[Opcode]bool{}
	for _, ex := range examples {
		body := hexvec.Bytes(t, ex.hex...)
		fr, err := Decode(ex.op, body)
		if err != nil {
			t.Fatalf("%v: %v", ex.op, err)
		}
		want := append(wire.AppendU32(nil, uint32(1+len(body))), byte(ex.op))
		want = append(want, body...)
		if got := AppendFrame(nil, fr); !bytes.Equal(got, want) {
			t.Fatalf("%v: frame %s, want %s", ex.op, hex.EncodeToString(got), hex.EncodeToString(want))
		}
		seen[ex.op] = true
	}
	for op := range 256 {
		if Opcode(op).Known() && !seen[Opcode(op)] {
			t.Errorf("%v has no example in spec/rift.yaml", Opcode(op))
		}
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
