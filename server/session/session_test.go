package session

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/service"
)

// decodeDelivery reassembles the frames in b and decodes the Delivery they carry.
func decodeDelivery(t *testing.T, b []byte) (frames int, d fibp.Delivery, requestID uint32) {
	t.Helper()
	var r fibp.Reassembler
	for len(b) > 0 {
		n := int(binary.BigEndian.Uint32(b))
		h, rest, err := fibp.ParseHeader(b[fibp.LengthSize : fibp.LengthSize+n])
		if err != nil {
			t.Fatal(err)
		}
		b = b[fibp.LengthSize+n:]
		frames++
		body, done, err := r.Add(h, rest)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			if h.Opcode != fibp.OpDelivery || len(b) != 0 {
				t.Fatalf("opcode %v, %d bytes left", h.Opcode, len(b))
			}
			if err := d.Decode(body); err != nil {
				t.Fatal(err)
			}
			return frames, d, h.RequestID
		}
	}
	t.Fatal("no complete frame")
	return
}

func TestAppendDelivery(t *testing.T) {
	small := []service.Delivery{{ID: service.MessageID{1}, Queue: "q", Payload: []byte("hi"), FairnessKey: "k", Weight: 2, Attempt: 3,
		RedriveCount: 1, EnqueuedAt: 10, LeasedAt: 20, ExpiresAt: 30, Headers: map[string]string{"a": "b"}}}
	big := []service.Delivery{{ID: service.MessageID{2}, Queue: "q", Payload: bytes.Repeat([]byte{7}, fibp.MaxFrameSize)}}
	for _, tc := range []struct {
		name   string
		ds     []service.Delivery
		frames int
	}{{"one frame", small, 1}, {"continued", big, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			frames, d, id := decodeDelivery(t, AppendDelivery(nil, 9, tc.ds))
			if frames != tc.frames || id != 9 || len(d.Messages) != len(tc.ds) {
				t.Fatalf("frames %d, request %d, %d messages", frames, id, len(d.Messages))
			}
			m, w := d.Messages[0], tc.ds[0]
			if service.MessageID(m.MessageID) != w.ID || m.Queue != w.Queue || !bytes.Equal(m.Payload, w.Payload) || m.FairnessKey != w.FairnessKey ||
				m.Weight != w.Weight || m.AttemptCount != w.Attempt || m.RedriveCount != w.RedriveCount ||
				m.EnqueuedAt != uint64(w.EnqueuedAt) || m.LeasedAt != uint64(w.LeasedAt) || m.LeaseExpiresAt != uint64(w.ExpiresAt) ||
				m.Headers["a"] != w.Headers["a"] {
				t.Fatalf("got %+v, want %+v", m, w)
			}
		})
	}
}

func TestErrorCode(t *testing.T) {
	for c := service.CodeOk; c <= service.CodeNodeNotFound; c++ {
		if c == service.CodeAPIKeyNotFound {
			continue // the spec spells it ApiKeyNotFound
		}
		if got := ErrorCode(c).String(); got != c.String() {
			t.Errorf("%v maps to %v", c, got)
		}
	}
}

func TestMessagesDefaults(t *testing.T) {
	req := &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "q", Payload: []byte("p")}}}
	m := Messages(req)[0]
	if m.FairnessKey != "" || m.Weight != 0 || m.DelayMs != 0 || m.HasKey {
		t.Fatalf("absent fields must be zero: %+v", m)
	}
}

func TestAppendDeliveryAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	ds := []service.Delivery{{Queue: "q", Payload: []byte("hi")}, {Queue: "q", Payload: []byte("ho")}}
	AppendDelivery(nil, 1, ds) // warm the pool
	if n := testing.AllocsPerRun(100, func() { AppendDelivery(nil, 1, ds) }); n > 1 {
		t.Errorf("%v allocations per Delivery frame, want 1 (the frame)", n)
	}
}

// An Error frame's message is a FIBP string: UTF-8, at most 65,535 bytes.
func TestErrorMessageIsAString(t *testing.T) {
	for _, msg := range []string{
		"short",
		strings.Repeat("a", 70_000),
		strings.Repeat("é", 40_000), // cut inside a two-byte character
		"bad \xff byte",             // not UTF-8
		strings.Repeat("€", 21_845) + "\xe2\x82", // valid up to a truncated character at the end
	} {
		got := ErrorMessage(msg)
		if len(got) > 65535 || !utf8.ValidString(got) {
			t.Errorf("ErrorMessage of %d bytes: %d bytes, UTF-8 %v", len(msg), len(got), utf8.ValidString(got))
		}
		if utf8.ValidString(msg) && !strings.HasPrefix(msg, got) {
			t.Errorf("ErrorMessage of a valid %d-byte message is not a prefix of it", len(msg))
		}
		if len(msg) <= 65535 && utf8.ValidString(msg) && got != msg {
			t.Errorf("a message that fits was changed")
		}
	}
}
