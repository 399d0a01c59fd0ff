package transport

// Conformance to the FIBP specification, byte for byte: every frame here is encoded by hand from
// the spec's layouts, and every answer is decoded by hand, so that a mistake in the generated
// codec (which both this server and its SDK use) cannot hide behind itself.

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"
)

// be builds a frame body from the spec's primitives (all big-endian).
type be []byte

func (b be) u8(v uint8) be   { return append(b, v) }
func (b be) u16(v uint16) be { return binary.BigEndian.AppendUint16(b, v) }
func (b be) u32(v uint32) be { return binary.BigEndian.AppendUint32(b, v) }
func (b be) u64(v uint64) be { return binary.BigEndian.AppendUint64(b, v) }
func (b be) str(s string) be { return append(b.u16(uint16(len(s))), s...) }
func (b be) text(s string) be {
	return append(b.u32(uint32(len(s))), s...)
}
func (b be) bytes(p []byte) be { return append(b.u32(uint32(len(p))), p...) }
func (b be) raw(p []byte) be   { return append(b, p...) }

// rawFrame is one frame: u32 length, u8 opcode, u8 flags, u32 request ID, body.
func rawFrame(op, flags uint8, id uint32, body []byte) []byte {
	f := be(nil).u32(uint32(6 + len(body))).u8(op).u8(flags).u32(id)
	return append(f, body...)
}

// specConn is a TCP connection driven with hand-encoded frames.
type specConn struct {
	t  *testing.T
	nc net.Conn
}

type specFrame struct {
	op, flags uint8
	id        uint32
	body      []byte
}

func dialSpec(t *testing.T, addr string) *specConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &specConn{t: t, nc: nc}
}

func (c *specConn) write(frames ...[]byte) {
	c.t.Helper()
	for _, f := range frames {
		if _, err := c.nc.Write(f); err != nil {
			c.t.Fatal(err)
		}
	}
}

// readFrame reads one frame, or returns the read error.
func (c *specConn) readFrame() (specFrame, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var n [4]byte
	if _, err := io.ReadFull(c.nc, n[:]); err != nil {
		return specFrame{}, err
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return specFrame{}, err
	}
	if len(body) < 6 {
		return specFrame{}, errors.New("frame shorter than its header")
	}
	return specFrame{op: body[0], flags: body[1], id: binary.BigEndian.Uint32(body[2:6]), body: body[6:]}, nil
}

// next reads the next frame, answering server Pings.
func (c *specConn) next() specFrame {
	c.t.Helper()
	for {
		f, err := c.readFrame()
		if err != nil {
			c.t.Fatalf("reading a frame: %v", err)
		}
		if f.op == 0x03 && f.id&0x80000000 != 0 {
			c.write(rawFrame(0x04, 0, f.id, nil))
			continue
		}
		return f
	}
}

// expect reads the next frame and checks its opcode and request ID.
func (c *specConn) expect(op uint8, id uint32) *rd {
	c.t.Helper()
	f := c.next()
	if f.op != op || f.id != id || f.flags != 0 {
		c.t.Fatalf("got opcode %#02x flags %#x request %#x body %x, want opcode %#02x request %#x", f.op, f.flags, f.id, f.body, op, id)
	}
	return &rd{t: c.t, b: f.body}
}

// expectError reads an Error frame answering id and returns its code and message.
func (c *specConn) expectError(id uint32, code uint8) (string, map[string]string) {
	c.t.Helper()
	r := c.expect(0xFE, id)
	got, msg, meta := r.u8(), r.str(), r.strMap()
	r.end()
	if got != code {
		c.t.Fatalf("Error code %#02x (%q), want %#02x", got, msg, code)
	}
	if msg == "" {
		c.t.Fatalf("Error %#02x without a message", code)
	}
	return msg, meta
}

// expectClosed checks that the server closes the connection without sending anything more.
func (c *specConn) expectClosed() {
	c.t.Helper()
	f, err := c.readFrame()
	if err == nil {
		c.t.Fatalf("frame %#02x after the server should have closed", f.op)
	}
}

// handshake sends a version-1 Handshake with CREDIT_FLOW_CONTROL and checks HandshakeOk.
func (c *specConn) handshake() {
	c.t.Helper()
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(1).u8(0).u32(1)))
	r := c.expect(0x02, 0)
	r.u16()
	r.u64()
	r.u32()
	r.u32()
	r.end()
}

// ping sends a Ping and waits for its Pong: every frame sent before it has been handled.
func (c *specConn) ping(id uint32) {
	c.t.Helper()
	c.write(rawFrame(0x03, 0, id, nil))
	c.expect(0x04, id).end()
}

// rd decodes an answer body with the spec's primitives.
type rd struct {
	t *testing.T
	b []byte
}

func (r *rd) take(n int) []byte {
	r.t.Helper()
	if len(r.b) < n {
		r.t.Fatalf("body truncated: need %d bytes, have %d: %x", n, len(r.b), r.b[:min(len(r.b), 64)])
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}
func (r *rd) u8() uint8   { r.t.Helper(); return r.take(1)[0] }
func (r *rd) u16() uint16 { r.t.Helper(); return binary.BigEndian.Uint16(r.take(2)) }
func (r *rd) u32() uint32 { r.t.Helper(); return binary.BigEndian.Uint32(r.take(4)) }
func (r *rd) u64() uint64 { r.t.Helper(); return binary.BigEndian.Uint64(r.take(8)) }
func (r *rd) str() string { r.t.Helper(); return string(r.take(int(r.u16()))) }
func (r *rd) bytes() []byte {
	r.t.Helper()
	return r.take(int(r.u32()))
}
func (r *rd) uuid() [16]byte { r.t.Helper(); return [16]byte(r.take(16)) }
func (r *rd) strMap() map[string]string {
	r.t.Helper()
	m := map[string]string{}
	for n := r.u16(); n > 0; n-- {
		k := r.str()
		m[k] = r.str()
	}
	return m
}

// end checks that the body holds nothing more (this server appends no unknown fields).
func (r *rd) end() {
	r.t.Helper()
	if len(r.b) != 0 {
		r.t.Fatalf("%d unexpected trailing bytes: %x", len(r.b), r.b)
	}
}

// createQueueBody is a CreateQueue of name with every setting at its default (all zeros).
func createQueueBody(name string) be {
	b := be(nil).str(name).u8(0).u8(0).u64(0) // name, no scripts, visibility_timeout_ms
	b = b.u8(0).u16(0).u8(0)                  // ordering none, no ordering key, when missing
	b = b.u16(0).u64(0)                       // no dedup key, dedup window
	b = b.u8(0).u32(0)                        // script_failure, park_dead_letter_after
	b = b.u32(0).u8(0).u64(0).u64(0)          // max_attempts, backoff, initial, max
	return b.u8(0).u64(0)                     // delivery_durability, reclaim_grace_ms
}

func (c *specConn) createQueue(id uint32, name string) {
	c.t.Helper()
	c.write(rawFrame(0xFD, 0, id, createQueueBody(name)))
	r := c.expect(0xFC, id)
	if code := r.u8(); code != 0 {
		c.t.Fatalf("CreateQueueResult code %#02x", code)
	}
	if r.str() == "" {
		c.t.Fatal("CreateQueueResult without a queue_id")
	}
	r.end()
}

// enqueueBody is an Enqueue of one message per payload to queue, without headers or options.
func enqueueBody(queue string, payloads ...string) be {
	b := be(nil).u32(uint32(len(payloads)))
	for _, p := range payloads {
		b = b.str(queue).u16(0).bytes([]byte(p)).u8(0).u8(0).u8(0).u8(0)
	}
	return b
}

type specResult struct {
	code      uint8
	id        [16]byte
	duplicate bool
}

func (c *specConn) enqueue(id uint32, body be) []specResult {
	c.t.Helper()
	c.write(rawFrame(0x10, 0, id, body))
	r := c.expect(0x11, id)
	out := make([]specResult, r.u32())
	for i := range out {
		out[i].code = r.u8()
		out[i].id = r.uuid()
		switch d := r.u8(); d {
		case 0, 1:
			out[i].duplicate = d == 1
		default:
			c.t.Fatalf("duplicate bool %#x", d)
		}
	}
	if hints := r.u16(); hints != 0 {
		c.t.Fatalf("%d route hints from a single node", hints)
	}
	r.end()
	return out
}

type specDelivery struct {
	id                                 [16]byte
	queue                              string
	headers                            map[string]string
	payload                            []byte
	fairnessKey                        string
	weight, attempts, redrives         uint32
	enqueuedAt, leasedAt, leaseExpires uint64
}

// delivery reads one Delivery frame for the subscription sub.
func (c *specConn) delivery(sub uint32) []specDelivery {
	c.t.Helper()
	r := c.expect(0x14, sub)
	out := make([]specDelivery, r.u32())
	for i := range out {
		d := &out[i]
		d.id, d.queue, d.headers, d.payload = r.uuid(), r.str(), r.strMap(), r.bytes()
		d.fairnessKey, d.weight, d.attempts, d.redrives = r.str(), r.u32(), r.u32(), r.u32()
		d.enqueuedAt, d.leasedAt, d.leaseExpires = r.u64(), r.u64(), r.u64()
	}
	r.end()
	return out
}

// consume subscribes sub to queue with credit and no throttles and checks ConsumeOk.
func (c *specConn) consume(sub uint32, queue string, credit uint32) {
	c.t.Helper()
	c.write(rawFrame(0x12, 0, sub, be(nil).str(queue).u32(credit).u16(0)))
	r := c.expect(0x13, sub)
	if r.str() == "" {
		c.t.Fatal("ConsumeOk without a consumer_id")
	}
	r.end()
}

func TestSpecHandshakeBytes(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(1).u8(0).u32(1)))
	f := c.next()
	want := be(nil).u16(1).u64(0).u32(16 << 20).u32(1)
	if f.op != 0x02 || f.flags != 0 || f.id != 0 || string(f.body) != string(want) {
		t.Fatalf("HandshakeOk: opcode %#02x flags %#x id %d body %x, want 02 00 0 %x", f.op, f.flags, f.id, f.body, want)
	}
	c.ping(1)
}

// The api_key is a string, so a Handshake may carry one of 65,535 bytes: the bound on the first
// frame must take the largest Handshake there is.
func TestSpecHandshakeWithTheLongestAPIKey(t *testing.T) {
	_, addr := startServer(t, Options{}) // authentication off: the key is not looked at
	c := dialSpec(t, addr)
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(1).u8(1).str(strings.Repeat("k", math.MaxUint16)).u32(0)))
	c.expect(0x02, 0)
	c.ping(1)
}

func TestSpecHandshakeNegotiatesDownToVersion1(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	// A client speaking up to version 7, with a capability bit the server lacks.
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(7).u8(0).u32(1|1<<9)))
	r := c.expect(0x02, 0)
	if v := r.u16(); v != 1 {
		t.Fatalf("negotiated_version %d, want 1", v)
	}
	r.u64()
	r.u32()
	if caps := r.u32(); caps&^1 != 0 {
		t.Fatalf("server_capabilities %#x sets reserved bits", caps)
	}
}

func TestSpecHandshakeUnsupportedVersion(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(0).u8(0).u32(0)))
	_, meta := c.expectError(0, 0x0D)
	if meta["max_version"] != "1" {
		t.Fatalf("metadata %v, want max_version 1", meta)
	}
	c.expectClosed()
}

func TestSpecFirstFrameMustBeHandshake(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.write(rawFrame(0x03, 0, 5, nil)) // a Ping before the Handshake
	c.expectError(5, 0x0E)
	c.expectClosed()
}

func TestSpecPingPong(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.ping(0x1234)
	c.ping(0x7FFFFFFF)
}

func TestSpecUnknownOpcodeKeepsTheConnection(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	for i, op := range []uint8{0x00, 0x06, 0x1D, 0x80, 0xD3, 0xFF, 0x11, 0x02, 0x14, 0xFC} {
		id := uint32(10 + i)
		c.write(rawFrame(op, 0, id, be(nil).u32(0)))
		c.expectError(id, 0x0E)
	}
	c.ping(99)
}

func TestSpecReservedFlagBits(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	for bit := uint(1); bit < 8; bit++ {
		id := uint32(bit)
		c.write(rawFrame(0x03, 1<<bit, id, nil))
		c.expectError(id, 0x0E)
	}
	c.ping(50)
}

func TestSpecOversizedFrame(t *testing.T) {
	_, addr := startServer(t, Options{MaxFrameSize: 1024})
	c := dialSpec(t, addr)
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(1).u8(0).u32(1)))
	r := c.expect(0x02, 0)
	r.u16()
	r.u64()
	if max := r.u32(); max != 1024 {
		t.Fatalf("max_frame_size %d, want the configured 1024", max)
	}
	r.u32()
	big := make([]byte, 2000)
	c.write(rawFrame(0x10, 0, 3, enqueueBody("q", string(big))))
	c.expectError(3, 0x0E)
	c.ping(4)
}

func TestSpecHotPathBytes(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "orders")

	msg := be(nil).u32(1).str("orders").u16(1).str("h").str("v").bytes([]byte("hello"))
	msg = msg.u8(1).str("tenant-a").u8(1).u32(3).u8(0).u8(0) // fairness_key, weight, no delay, no idempotency key
	res := c.enqueue(2, msg)
	if len(res) != 1 || res[0].code != 0 || res[0].id == ([16]byte{}) || res[0].duplicate {
		t.Fatalf("EnqueueResult %+v", res)
	}
	if v := res[0].id[6] >> 4; v != 7 {
		t.Fatalf("message ID %x is version %d, want a UUIDv7", res[0].id, v)
	}

	c.consume(3, "orders", 10)
	ds := c.delivery(3)
	if len(ds) != 1 {
		t.Fatalf("%d messages in the Delivery", len(ds))
	}
	d := ds[0]
	if d.id != res[0].id || d.queue != "orders" || d.headers["h"] != "v" || len(d.headers) != 1 || string(d.payload) != "hello" ||
		d.fairnessKey != "tenant-a" || d.weight != 3 || d.attempts != 1 || d.redrives != 0 {
		t.Fatalf("Delivery %+v", d)
	}
	if d.enqueuedAt == 0 || d.leasedAt < d.enqueuedAt || d.leaseExpires < d.leasedAt+30_000 {
		t.Fatalf("Delivery times enqueued %d leased %d expires %d (default visibility 30 s)", d.enqueuedAt, d.leasedAt, d.leaseExpires)
	}

	// ExtendLease: new expiry measured from receipt.
	c.write(rawFrame(0x1B, 0, 4, be(nil).u32(2).str("orders").raw(d.id[:]).u64(60_000).str("orders").raw(make([]byte, 16)).u64(1)))
	r := c.expect(0x1C, 4)
	if n := r.u32(); n != 2 {
		t.Fatalf("%d ExtendLease results", n)
	}
	if code, exp := r.u8(), r.u64(); code != 0 || exp < d.leasedAt+60_000 {
		t.Fatalf("ExtendLease result %#02x expiry %d", code, exp)
	}
	if code, exp := r.u8(), r.u64(); code != 0x02 || exp != 0 {
		t.Fatalf("ExtendLease of an unknown message: %#02x expiry %d, want 0x02 and 0", code, exp)
	}
	r.end()

	// Nack with retry_after_ms, then the redelivery says attempt 2.
	c.write(rawFrame(0x19, 0, 5, be(nil).u32(1).str("orders").raw(d.id[:]).str("boom").u8(1).u64(0)))
	r = c.expect(0x1A, 5)
	if n, code := r.u32(), r.u8(); n != 1 || code != 0 {
		t.Fatalf("NackResult count %d code %#02x", n, code)
	}
	r.end()
	ds = c.delivery(3)
	if len(ds) != 1 || ds[0].id != d.id || ds[0].attempts != 2 {
		t.Fatalf("redelivery %+v", ds)
	}

	// Ack: one known, one unknown message.
	c.write(rawFrame(0x17, 0, 6, be(nil).u32(2).str("orders").raw(d.id[:]).str("orders").raw(d.id[:])))
	r = c.expect(0x18, 6)
	if n, a, b := r.u32(), r.u8(), r.u8(); n != 2 || a != 0 || b != 0x02 {
		t.Fatalf("AckResult count %d codes %#02x %#02x, want 00 02", n, a, b)
	}
	r.end()
}

func TestSpecEnqueueUnknownQueueIsPerItem(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "a")
	body := be(nil).u32(2)
	body = body.str("nope").u16(0).bytes(nil).u8(0).u8(0).u8(0).u8(0)
	body = body.str("a").u16(0).bytes(nil).u8(0).u8(0).u8(0).u8(0)
	res := c.enqueue(2, body)
	if len(res) != 2 || res[0].code != 0x01 || res[0].id != ([16]byte{}) || res[1].code != 0 {
		t.Fatalf("EnqueueResult %+v, want QueueNotFound with a zero ID, then Ok", res)
	}
}

func TestSpecConsumeUnknownQueue(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.write(rawFrame(0x12, 0, 7, be(nil).str("nope").u32(0).u16(0)))
	c.expectError(7, 0x01)
	c.ping(8)
}

func TestSpecCreditAndCancelConsumeHaveNoAnswer(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	c.enqueue(2, enqueueBody("q", "1", "2", "3"))
	c.consume(3, "q", 1)
	if ds := c.delivery(3); len(ds) != 1 {
		t.Fatalf("credit 1 delivered %d", len(ds))
	}
	c.ping(4) // no second delivery at zero credit before the Pong
	c.write(rawFrame(0x15, 0, 3, be(nil).u32(1)))
	if ds := c.delivery(3); len(ds) != 1 {
		t.Fatalf("credit 1 more delivered %d", len(ds))
	}
	c.write(rawFrame(0x15, 0, 77, be(nil).u32(5))) // an unknown subscription: ignored
	c.write(rawFrame(0x16, 0, 3, nil))
	c.write(rawFrame(0x16, 0, 78, nil)) // cancelling an unknown subscription: no answer either
	c.ping(5)
	c.write(rawFrame(0x15, 0, 3, be(nil).u32(5))) // credit for the cancelled subscription
	c.enqueue(6, enqueueBody("q", "4"))
	c.ping(7)
}

func TestSpecContinuationMidField(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	body := enqueueBody("q", "split across three frames")
	// Cut inside the queue string's length and inside the payload; a Ping on another request ID
	// interleaves.
	c.write(rawFrame(0x10, 1, 2, body[:5]), rawFrame(0x03, 0, 9, nil), rawFrame(0x10, 1, 2, body[5:20]), rawFrame(0x10, 0, 2, body[20:]))
	c.expect(0x04, 9).end()
	r := c.expect(0x11, 2)
	if n, code := r.u32(), r.u8(); n != 1 || code != 0 {
		t.Fatalf("EnqueueResult of a continued body: count %d code %#02x", n, code)
	}
}

func TestSpecTrailingBytesAreIgnored(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(1).u8(0).u32(1).u32(0xdeadbeef)))
	c.expect(0x02, 0)
	c.write(rawFrame(0xFD, 0, 1, createQueueBody("q").u64(42)))
	if code := c.expect(0xFC, 1).u8(); code != 0 {
		t.Fatalf("CreateQueue with trailing bytes: %#02x", code)
	}
	c.write(rawFrame(0x10, 0, 2, enqueueBody("q", "x").u8(7)))
	if r := c.expect(0x11, 2); r.u32() != 1 || r.u8() != 0 {
		t.Fatal("Enqueue with trailing bytes failed")
	}
	c.write(rawFrame(0x03, 0, 3, []byte{1, 2, 3}))
	c.expect(0x04, 3)
}

func TestSpecMalformedBodies(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	for i, tc := range []struct {
		op   uint8
		body be
	}{
		{0x10, be(nil).u32(1).str("q")}, // truncated
		{0x10, be(nil).u32(1).u16(2).raw([]byte{0xff, 0xfe}).u16(0).bytes(nil).u32(0)}, // queue not UTF-8
		{0x10, be(nil).u32(1).str("q").u16(0).bytes(nil).u8(2).u8(0).u8(0).u8(0)},      // optional present = 2
		{0x12, be(nil).str("q")},              // Consume truncated
		{0xED, be(nil).str("k").u64(0).u8(5)}, // bool = 5
		{0x17, be(nil).u32(1000).str("q")},    // count larger than the body
	} {
		id := uint32(100 + i)
		c.write(rawFrame(tc.op, 0, id, tc.body))
		c.expectError(id, 0x0E)
	}
	c.ping(1)
}

func TestSpecShortFrameClosesTheConnection(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.write([]byte{0, 0, 0, 3, 0x03, 0, 0})
	c.expectError(0, 0x0E)
	c.expectClosed()
}

func TestSpecDisconnect(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	// An in-flight request is answered before the server closes.
	c.write(rawFrame(0x10, 0, 2, enqueueBody("q", "x")), rawFrame(0x05, 0, 3, nil))
	if r := c.expect(0x11, 2); r.u32() != 1 || r.u8() != 0 {
		t.Fatal("in-flight Enqueue not answered before the close")
	}
	c.expectClosed()
}

func TestSpecWithoutCreditFlowControlTheServerPushesFreely(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.write(rawFrame(0x01, 0, 0, be(nil).u16(1).u8(0).u32(0))) // no capabilities
	r := c.expect(0x02, 0)
	r.u16()
	r.u64()
	r.u32()
	r.u32()
	c.createQueue(1, "q")
	c.enqueue(2, enqueueBody("q", "1", "2", "3"))
	c.consume(3, "q", 1) // credit is ignored
	got := 0
	for got < 3 {
		got += len(c.delivery(3))
	}
}

func TestSpecCreditZeroIsUnlimited(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	c.enqueue(2, enqueueBody("q", "1", "2", "3", "4", "5"))
	c.consume(3, "q", 0)
	got := 0
	for got < 5 {
		got += len(c.delivery(3))
	}
}

func TestSpecIdempotencyKeyDuplicate(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	msg := be(nil).str("q").u16(0).bytes([]byte("x")).u8(0).u8(0).u8(0).u8(1).str("order-17")
	res := c.enqueue(2, be(nil).u32(2).raw(msg).raw(msg))
	if res[0].code != 0 || res[0].duplicate || res[1].code != 0 || !res[1].duplicate || res[1].id != res[0].id {
		t.Fatalf("EnqueueResult %+v: the second item must be Ok, duplicate, with the first one's ID", res)
	}
}

func TestSpecServerPingUsesTheServerIDRange(t *testing.T) {
	_, addr := startServer(t, Options{PingInterval: 20 * time.Millisecond})
	c := dialSpec(t, addr)
	c.handshake()
	for range 2 {
		f, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.op != 0x03 || f.id&0x80000000 == 0 || f.id == 0x80000000 || len(f.body) != 0 || f.flags != 0 {
			t.Fatalf("server ping: opcode %#02x id %#x body %x", f.op, f.id, f.body)
		}
		c.write(rawFrame(0x04, 0, f.id, nil))
	}
	c.ping(1)
}

func TestSpecServerShutdownSendsDisconnect(t *testing.T) {
	s, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go s.Shutdown(ctx)
	c.expect(0x05, 0).end()
	c.expectClosed()
}

// Delivery frames carry the Consume's request ID, which must be client-initiated: 0 is the
// handshake's and bit 31 marks server-initiated frames (a client ignores those it does not
// know), so a subscription there could never be delivered to.
func TestSpecConsumeRequestIDOutsideTheClientRange(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	c.enqueue(2, enqueueBody("q", "x"))
	for _, id := range []uint32{0, 0x80000000, 0x80000005, 0xFFFFFFFF} {
		c.write(rawFrame(0x12, 0, id, be(nil).str("q").u32(0).u16(0)))
		c.expectError(id, 0x0E)
	}
	c.consume(3, "q", 0)
	if ds := c.delivery(3); len(ds) != 1 {
		t.Fatalf("%d messages delivered", len(ds))
	}
}
