package cluster

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// The frame around a body: [u32 length][u8 opcode][u8 flags][u32 request_id][body], the length
// counting the header; a snapshot's last chunk carries flag Last.
func TestFrameLayout(t *testing.T) {
	got := AppendFrame(nil, FlagLast, 7, &SnapshotChunk{Data: []byte("ab")})
	want, _ := hex.DecodeString("0000000c" + // length 12: header 6, body 6
		"1a" + "01" + "00000007" + // SnapshotChunk, Last, request 7
		"00000002" + "6162") // data "ab"
	if !bytes.Equal(got, want) {
		t.Fatalf("frame %x, want %x", got, want)
	}
	h, body, err := ParseHeader(got[LengthSize:])
	if err != nil || h.Opcode != OpSnapshotChunk || h.Flags != FlagLast || h.RequestID != 7 {
		t.Fatalf("header %+v, %v", h, err)
	}
	fr, err := Decode(h.Opcode, body)
	if err != nil || string(fr.(*SnapshotChunk).Data) != "ab" {
		t.Fatalf("body %+v, %v", fr, err)
	}
}
