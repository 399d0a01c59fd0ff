package listener

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
)

// chunks hands out its data at most n bytes per Read.
type chunks struct {
	data []byte
	n    int
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}

// A stream's reader applies the protocol's limits, AUTH's own included, before reading a body.
func TestFrameReaderErrors(t *testing.T) {
	auth := append(binary.BigEndian.AppendUint32(nil, 4100), byte(riftproto.OpAuth))
	for _, tc := range []struct {
		name string
		data []byte
		want error
		max  int // for a *wire.FrameSizeError
	}{
		{"clean end", nil, io.EOF, 0},
		{"end inside the length", []byte{0, 0, 1}, io.ErrUnexpectedEOF, 0},
		{"end before the opcode", []byte{0, 0, 0, 5}, io.ErrUnexpectedEOF, 0},
		{"end inside a body", []byte{0, 0, 0, 5, 4, 0}, io.ErrUnexpectedEOF, 0},
		{"end inside a large body", append([]byte{0, 1, 0, 0, 4}, make([]byte, 40<<10)...), io.ErrUnexpectedEOF, 0},
		{"length zero", []byte{0, 0, 0, 0}, nil, riftproto.MaxFrameSize},
		{"length above the maximum", binary.BigEndian.AppendUint32(nil, riftproto.MaxFrameSize+1), nil, riftproto.MaxFrameSize},
		{"AUTH above its limit", auth, nil, riftproto.OpAuth.MaxBody()},
	} {
		fr := newFrameReader(&chunks{data: tc.data, n: 3})
		_, err := fr.Next()
		var size *wire.FrameSizeError
		switch {
		case tc.want != nil && err != tc.want:
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case tc.want == nil && (!errors.As(err, &size) || size.Max != tc.max):
			t.Errorf("%s: %v, want a frame size error with limit %d", tc.name, err, tc.max)
		}
		fr.Release()
	}
}

// The publisher stream's decoder agrees with the generated one on every body, whether or not it
// repeats the previous subject and reply.
func TestPubDecoderMatchesGenerated(t *testing.T) {
	str := func(s string) []byte { return wire.AppendString16(nil, s) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	bodies := [][]byte{
		cat(str("a.b"), str(""), []byte("one")),
		cat(str("a.b"), str(""), []byte("two")),
		cat(str("a.b"), str(""), nil),                           // empty payload: nil
		cat(str("a.b"), str("_INBOX.x"), []byte("r")),           // the reply changes
		cat(str("a.b"), str("_INBOX.x"), []byte("r2")),          // repeated with the reply
		cat(str("a.b"), str("_INBOX.y"), []byte("r3")),          // same length, other reply
		cat(str("a.c"), str("_INBOX.y"), []byte("s")),           // same length, other subject
		cat(str("a.c"), []byte{0, 9}, []byte("_INB")),           // truncated reply
		cat(str("a.c"), str("_INBOX.y")),                        // valid again, no payload
		cat(str("a.c"), str("_INBOX.y"), make([]byte, 1<<20+1)), // payload above 1 MiB
		cat(str("a.c"), str("_INBOX.y"), []byte{0xff}),          // binary payload is fine
		cat(str("a.\xff"), str(""), nil),                        // invalid UTF-8
		cat(str("a.\xff"), str(""), nil),                        // ... refused again
		{0},                                                     // truncated length
		cat(str("a.c"), str("_INBOX.y")[:1]),                    // truncated after the subject
	}
	var d pubDecoder
	for i, b := range bodies {
		var want riftproto.Publish
		werr := want.Decode(b)
		subj, reply, payload, err := d.decode(riftproto.OpPublish, b)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("body %d: error %v, want %v", i, err, werr)
		}
		if err == nil && (subj != want.Subject || reply != want.Reply || !bytes.Equal(payload, want.Payload) || (payload == nil) != (want.Payload == nil)) {
			t.Fatalf("body %d: %q %q %q, want %q %q %q", i, subj, reply, payload, want.Subject, want.Reply, want.Payload)
		}
	}
}
