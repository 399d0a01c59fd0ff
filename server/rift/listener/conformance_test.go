package listener_test

// Conformance to the Rift messaging spec (version 1) byte for byte: every frame is encoded by
// hand from the spec's opcode table, and every answer is compared with the bytes the spec gives,
// so that a mistake in the generated codec (shared by this server and its SDK) cannot hide.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	rt "github.com/filamq/fila/server/internal/rifttest"
)

// rf is a Rift frame under construction: u32 body_length, then the u8 opcode and its fields.
type rf []byte

func rframe(op byte) rf      { return rf{op} }
func (f rf) str(s string) rf { return append(binary.BigEndian.AppendUint16(f, uint16(len(s))), s...) }
func (f rf) u32(v uint32) rf { return binary.BigEndian.AppendUint32(f, v) }
func (f rf) u64(v uint64) rf { return binary.BigEndian.AppendUint64(f, v) }
func (f rf) raw(p string) rf { return append(f, p...) }
func (f rf) bytes() []byte   { return append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...) }
func okFrame() []byte        { return []byte{0, 0, 0, 1, 2} }
func messageFrame(subj, reply, payload string) []byte {
	return rframe(7).str(subj).str(reply).raw(payload).bytes()
}

// rstream is a raw operation stream.
type rstream struct {
	t *testing.T
	s *quic.Stream
}

func ropen(t *testing.T, c *quic.Conn) *rstream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.CancelRead(0); s.CancelWrite(0) })
	return &rstream{t: t, s: s}
}

func (r *rstream) write(frames ...[]byte) {
	r.t.Helper()
	for _, f := range frames {
		if _, err := r.s.Write(f); err != nil {
			r.t.Fatal(err)
		}
	}
}

// read reads one whole frame, length prefix included.
func (r *rstream) read() ([]byte, error) {
	_ = r.s.SetReadDeadline(time.Now().Add(10 * time.Second))
	var n [4]byte
	if _, err := io.ReadFull(r.s, n[:]); err != nil {
		return nil, err
	}
	f := make([]byte, 4+binary.BigEndian.Uint32(n[:]))
	copy(f, n[:])
	_, err := io.ReadFull(r.s, f[4:])
	return f, err
}

// expect reads one frame and checks it is exactly want.
func (r *rstream) expect(want []byte) {
	r.t.Helper()
	got, err := r.read()
	if err != nil {
		r.t.Fatalf("reading, want %x: %v", want, err)
	}
	if !bytes.Equal(got, want) {
		r.t.Fatalf("got frame %x, want %x", got, want)
	}
}

// expectError reads an ERROR frame (u32 length, 03, u16 code, str message) with code, then the
// end of the stream.
func (r *rstream) expectError(code uint16) string {
	r.t.Helper()
	got, err := r.read()
	if err != nil {
		r.t.Fatalf("reading, want ERROR %d: %v", code, err)
	}
	if len(got) < 9 || got[4] != 3 || binary.BigEndian.Uint16(got[5:]) != code {
		r.t.Fatalf("got frame %x, want ERROR code %d", got, code)
	}
	n := int(binary.BigEndian.Uint16(got[7:]))
	if len(got) != 9+n || n == 0 {
		r.t.Fatalf("ERROR frame %x: message length %d does not fill the frame", got, n)
	}
	r.expectEnd()
	return string(got[9:])
}

// expectEnd checks that the server finished its half of the stream.
func (r *rstream) expectEnd() {
	r.t.Helper()
	if f, err := r.read(); !errors.Is(err, io.EOF) {
		r.t.Fatalf("want the end of the stream, got %x, %v", f, err)
	}
}

// rauth dials and authenticates with hand-encoded AUTH, checking OK and the end of that stream.
func rauth(t *testing.T, addr, token string) *quic.Conn {
	t.Helper()
	c, err := rt.Dial(t, addr, rt.ClientTLS(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := ropen(t, c)
	s.write(rframe(1).str(token).bytes())
	s.expect(okFrame())
	s.expectEnd()
	return c
}

func TestSpecRiftAuthBytes(t *testing.T) {
	f := start(t, nil)
	c := rauth(t, f.addr, "admin-token")
	s := ropen(t, c)
	s.write(rframe(8).bytes())
	s.expect(okFrame())
}

func TestSpecRiftFailedAuthClosesTheConnection(t *testing.T) {
	f := start(t, nil)
	for _, first := range [][]byte{
		rframe(1).str("wrong-token").bytes(),
		rframe(8).bytes(), // not AUTH
	} {
		c, err := rt.Dial(t, f.addr, rt.ClientTLS(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := ropen(t, c)
		s.write(first)
		select {
		case <-c.Context().Done():
		case <-time.After(closeWait):
			t.Fatalf("first frame %x: the connection stays open after %v", first, closeWait)
		}
	}
}

func TestSpecRiftPublishSubscribeBytes(t *testing.T) {
	f := start(t, nil)
	c := rauth(t, f.addr, "admin-token")
	sub := ropen(t, c)
	sub.write(rframe(6).str("game.*").str("").bytes())
	sub.expect(okFrame())

	pub := ropen(t, c)
	// PUBLISH has no answer; PING is the barrier; PUBLISH_ACK answers OK; an empty payload is
	// a valid payload.
	pub.write(rframe(4).str("game.a").str("").raw("one").bytes(),
		rframe(4).str("game.b").str("_INBOX.x").raw("").bytes(),
		rframe(8).bytes(),
		rframe(5).str("game.c").str("").raw("\x00three").bytes())
	pub.expect(okFrame())
	pub.expect(okFrame())
	sub.expect(messageFrame("game.a", "", "one"))
	sub.expect(messageFrame("game.b", "_INBOX.x", ""))
	sub.expect(messageFrame("game.c", "", "\x00three"))
}

func TestSpecRiftRequestBytes(t *testing.T) {
	f := start(t, nil)
	responder := rauth(t, f.addr, "svc-token")
	sub := ropen(t, responder)
	sub.write(rframe(6).str("svc.echo").str("").bytes())
	sub.expect(okFrame())

	c := rauth(t, f.addr, "game-token")
	req := ropen(t, c)
	req.write(rframe(9).u32(5000).str("svc.echo").raw("ping").bytes())

	got, err := sub.read()
	if err != nil {
		t.Fatal(err)
	}
	// MESSAGE: subject svc.echo, reply _INBOX.<something>, payload "ping".
	head := rframe(7).str("svc.echo")
	if !bytes.Equal(got[4:4+len(head)], head) {
		t.Fatalf("request delivered as %x", got)
	}
	rest := got[4+len(head):]
	reply := string(rest[2 : 2+binary.BigEndian.Uint16(rest)])
	if !strings.HasPrefix(reply, "_INBOX.") || string(rest[2+len(reply):]) != "ping" {
		t.Fatalf("request delivered as %x (reply %q)", got, reply)
	}
	answer := ropen(t, responder)
	answer.write(rframe(5).str(reply).str("").raw("pong").bytes())
	answer.expect(okFrame())
	req.expect(messageFrame(reply, "", "pong"))
	req.expectEnd()

	// Timeouts outside 1-120,000 ms.
	for _, ms := range []uint32{0, 120_001} {
		s := ropen(t, c)
		s.write(rframe(9).u32(ms).str("svc.echo").bytes())
		s.expectError(2)
	}
	// No responder.
	s := ropen(t, c)
	s.write(rframe(9).u32(1).str("svc.nobody").bytes())
	s.expectError(2)
}

func TestSpecRiftStreamsBytes(t *testing.T) {
	f := start(t, nil)
	c := rauth(t, f.addr, "reader-token")
	now := uint64(f.clock.Now().UnixMilli())

	s := ropen(t, c)
	s.write(rframe(10).str("events").str("events.a").str("").raw("p1").bytes())
	s.expect(rf{11}.u64(1).u64(now).bytes())
	s.expectEnd()

	open := func(name, filter string, start uint64, wait, pending uint32) *rstream {
		s := ropen(t, c)
		s.write(rframe(12).str("events").str(name).str(filter).u64(start).u32(wait).u32(pending).bytes())
		return s
	}
	s = open("c1", "events.>", 0, 30_000, 10)
	s.expect(okFrame())
	s.expectEnd()

	s = ropen(t, c)
	s.write(rframe(13).str("events").str("c1").u32(10).bytes())
	s.expect(rf{14}.u64(1).u64(now).u32(1).str("events.a").str("").raw("p1").bytes())
	s.expect(okFrame())
	s.expectEnd()

	s = ropen(t, c)
	s.write(rframe(15).str("events").str("c1").u64(1).bytes())
	s.expect(okFrame())
	s.expectEnd()
	s = ropen(t, c) // acking again is idempotent
	s.write(rframe(15).str("events").str("c1").u64(1).bytes())
	s.expect(okFrame())
	s = ropen(t, c) // a sequence never delivered to the consumer
	s.write(rframe(15).str("events").str("c1").u64(99).bytes())
	s.expectError(2)

	// Every range the spec names, just outside it.
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"fetch limit 0", rframe(13).str("events").str("c1").u32(0).bytes()},
		{"fetch limit 257", rframe(13).str("events").str("c1").u32(257).bytes()},
		{"ack wait 0", rframe(12).str("events").str("c2").str("").u64(0).u32(0).u32(1).bytes()},
		{"ack wait 3,600,001", rframe(12).str("events").str("c2").str("").u64(0).u32(3_600_001).u32(1).bytes()},
		{"max pending 0", rframe(12).str("events").str("c2").str("").u64(0).u32(1).u32(0).bytes()},
		{"max pending 65,537", rframe(12).str("events").str("c2").str("").u64(0).u32(1).u32(65_537).bytes()},
		{"name of 97 characters", rframe(12).str("events").str(strings.Repeat("n", 97)).str("").u64(0).u32(1).u32(1).bytes()},
		{"empty name", rframe(12).str("events").str("").str("").u64(0).u32(1).u32(1).bytes()},
		{"name with a space", rframe(12).str("events").str("a b").str("").u64(0).u32(1).u32(1).bytes()},
		{"unknown stream", rframe(10).str("nope").str("events.a").str("").bytes()},
		{"subject outside the stream", rframe(10).str("events").str("small.a").str("").bytes()},
		{"resume with another configuration", rframe(12).str("events").str("c1").str("events.>").u64(0).u32(30_000).u32(11).bytes()},
		{"fetch from a consumer never opened", rframe(13).str("events").str("c9").u32(1).bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ropen(t, c)
			s.write(tc.frame)
			s.expectError(2)
		})
	}
	// The edges themselves are valid.
	s = open("c3", "", 0, 3_600_000, 65_536)
	s.expect(okFrame())
	s = open(strings.Repeat("n", 96), "", 0, 1, 1)
	s.expect(okFrame())
}

func TestSpecRiftPermissionErrors(t *testing.T) {
	f := start(t, nil)
	c := rauth(t, f.addr, "admin-token")
	s := ropen(t, c) // Rift owns rift.events: even a control identity may not publish there
	s.write(rframe(5).str("rift.events.x").str("").bytes())
	s.expectError(1)
	g := rauth(t, f.addr, "game-token")
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"subscribe wider than game.*", rframe(6).str("game.>").str("").bytes()},
		{"publish outside the ACL", rframe(5).str("other.x").str("").bytes()},
		{"reply outside _INBOX", rframe(5).str("game.x").str("game.reply").bytes()},
		{"reply not covered by the subscribe ACL", rframe(5).str("game.x").str("_INBOX.other.x").bytes()},
		{"rift.control without control", rframe(6).str("rift.control").str("").bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ropen(t, g)
			s.write(tc.frame)
			s.expectError(1)
		})
	}
}

// REQUEST makes its own private inbox: the requester needs publish access to the subject only,
// no subscribe grant on any inbox.
func TestSpecRiftRequestNeedsNoInboxGrant(t *testing.T) {
	f := start(t, nil)
	responder := rauth(t, f.addr, "admin-token")
	sub := ropen(t, responder)
	sub.write(rframe(6).str("game.svc").str("").bytes())
	sub.expect(okFrame())

	c := rauth(t, f.addr, "wide-token") // publish game.>, subscribe game.>: no _INBOX grant
	req := ropen(t, c)
	req.write(rframe(9).u32(5000).str("game.svc").raw("q").bytes())
	got, err := sub.read()
	if err != nil {
		t.Fatal(err)
	}
	rest := got[4+len(rframe(7).str("game.svc")):]
	reply := string(rest[2 : 2+binary.BigEndian.Uint16(rest)])
	answer := ropen(t, responder)
	answer.write(rframe(5).str(reply).str("").raw("a").bytes())
	answer.expect(okFrame())
	req.expect(messageFrame(reply, "", "a"))
}

// STREAM_PUBLISH does not also publish to the live broker.
func TestSpecRiftStreamPublishIsNotLive(t *testing.T) {
	f := start(t, nil)
	c := rauth(t, f.addr, "reader-token")
	sub := ropen(t, c)
	sub.write(rframe(6).str("events.>").str("").bytes())
	sub.expect(okFrame())
	s := ropen(t, c)
	s.write(rframe(10).str("events").str("events.stored").str("").raw("durable").bytes())
	got, err := s.read()
	if err != nil || len(got) != 4+17 || got[4] != 11 {
		t.Fatalf("STREAM_PUBLISH answered %x, %v", got, err)
	}
	p := ropen(t, c)
	p.write(rframe(5).str("events.live").str("").raw("live").bytes())
	p.expect(okFrame())
	sub.expect(messageFrame("events.live", "", "live"))
}
