package transport

// Conformance to the FIBP specification's queue semantics (leases, delays, dead letters, ordering,
// settlement from other connections, string limits, continuation), with the hand-encoded frames of
// conformance_test.go.

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// createQueueWith is a CreateQueue of name with max_attempts, backoff and ordering set.
func createQueueWith(name string, ordering uint8, maxAttempts uint32, backoff uint8) be {
	b := be(nil).str(name).u8(0).u8(0).u64(0)
	b = b.u8(ordering).u16(0).u8(0)
	b = b.u16(0).u64(0)
	b = b.u8(0).u32(0)
	b = b.u32(maxAttempts).u8(backoff).u64(0).u64(0)
	return b.u8(0).u64(0)
}

func (c *specConn) stats(id uint32, queue string) (depth, inFlight, delayed uint64) {
	c.t.Helper()
	c.write(rawFrame(0xF9, 0, id, be(nil).str(queue)))
	r := c.expect(0xF8, id)
	if code := r.u8(); code != 0 {
		c.t.Fatalf("GetStats %q: %#02x", queue, code)
	}
	return r.u64(), r.u64(), r.u64()
}

func TestSpecExtendLeaseIsCappedAt12Hours(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	c.enqueue(2, enqueueBody("q", "x"))
	c.consume(3, "q", 0)
	d := c.delivery(3)[0]
	c.write(rawFrame(0x1B, 0, 4, be(nil).u32(1).str("q").raw(d.id[:]).u64(1<<62)))
	r := c.expect(0x1C, 4)
	r.u32()
	if code, exp := r.u8(), r.u64(); code != 0 || exp < d.leasedAt || exp > uint64(time.Now().UnixMilli())+12*3600*1000 {
		t.Fatalf("ExtendLease by 2^62 ms: %#02x expiry %d, want at most 12 hours from now", code, exp)
	}
}

func TestSpecDelayedMessageIsCountedButNotDelivered(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	msg := be(nil).u32(1).str("q").u16(0).bytes([]byte("later")).u8(0).u8(0).u8(1).u64(3_600_000).u8(0)
	c.enqueue(2, msg)
	c.consume(3, "q", 0)
	c.enqueue(4, enqueueBody("q", "now"))
	if ds := c.delivery(3); len(ds) != 1 || string(ds[0].payload) != "now" {
		t.Fatalf("delivered %+v, want only the undelayed message", ds)
	}
	if depth, inFlight, delayed := c.stats(5, "q"); depth != 1 || inFlight != 1 || delayed != 1 {
		t.Fatalf("depth %d in_flight %d delayed %d, want 1 1 1", depth, inFlight, delayed)
	}
}

func TestSpecDeadLetterAndRedrive(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.write(rawFrame(0xFD, 0, 1, createQueueWith("q", 0, 1, 1))) // max_attempts 1, backoff none
	if code := c.expect(0xFC, 1).u8(); code != 0 {
		t.Fatalf("CreateQueue %#02x", code)
	}
	res := c.enqueue(2, enqueueBody("q", "x"))
	c.consume(3, "q", 0)
	d := c.delivery(3)[0]
	c.write(rawFrame(0x19, 0, 4, be(nil).u32(1).str("q").raw(d.id[:]).str("failed").u8(0)))
	c.expect(0x1A, 4)
	c.consume(5, "q.dlq", 0)
	dl := c.delivery(5)[0]
	if dl.id != res[0].id || dl.queue != "q.dlq" || dl.attempts != 2 {
		t.Fatalf("dead-lettered delivery %+v: same ID, from q.dlq, attempt 2 (one before in q)", dl)
	}
	c.write(rawFrame(0x19, 0, 6, be(nil).u32(1).str("q.dlq").raw(dl.id[:]).str("put back").u8(0)))
	c.expect(0x1A, 6)
	c.write(rawFrame(0x16, 0, 5, nil)) // stop consuming the DLQ
	c.ping(7)

	c.write(rawFrame(0xEF, 0, 8, be(nil).str("q.dlq").u64(0).u8(2)))
	r := c.expect(0xEE, 8)
	if code, n := r.u8(), r.u64(); code != 0 || n != 1 {
		t.Fatalf("RedriveResult %#02x redriven %d", code, n)
	}
	back := c.delivery(3)[0]
	if back.id != res[0].id || back.queue != "q" || back.attempts != 1 || back.redrives != 1 {
		t.Fatalf("redriven delivery %+v: same ID, attempt_count reset (1), redrive_count 1", back)
	}
}

func TestSpecOrderedQueueDeliversOneAtATime(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.write(rawFrame(0xFD, 0, 1, createQueueWith("q", 1, 0, 0))) // the whole queue is one group
	if code := c.expect(0xFC, 1).u8(); code != 0 {
		t.Fatalf("CreateQueue %#02x", code)
	}
	c.enqueue(2, enqueueBody("q", "1", "2"))
	c.consume(3, "q", 0)
	first := c.delivery(3)
	if len(first) != 1 || string(first[0].payload) != "1" {
		t.Fatalf("first delivery %+v", first)
	}
	if _, inFlight, _ := c.stats(4, "q"); inFlight != 1 {
		t.Fatalf("in_flight %d while the group's head is leased", inFlight)
	}
	c.write(rawFrame(0x17, 0, 5, be(nil).u32(1).str("q").raw(first[0].id[:])))
	c.expect(0x18, 5)
	if second := c.delivery(3); len(second) != 1 || string(second[0].payload) != "2" {
		t.Fatalf("second delivery %+v", second)
	}
}

// A lease that expired has ended: once its message is redelivered to another consumer, the
// first consumer's ExtendLease, Ack and Nack answer MessageNotFound ("the lease already expired
// and the message was redelivered"; concepts.md: "An ack, nack or extend for a message whose
// lease ended answers MessageNotFound"), and the new holder's settle normally.
func TestSpecSettlingAnExpiredLeaseAfterRedeliveryIsMessageNotFound(t *testing.T) {
	_, addr := startServer(t, Options{})
	a := dialSpec(t, addr)
	a.handshake()
	q := be(nil).str("q").u8(0).u8(0).u64(100) // visibility timeout 100 ms
	q = q.u8(0).u16(0).u8(0).u16(0).u64(0).u8(0).u32(0).u32(0).u8(1).u64(0).u64(0).u8(0).u64(0)
	a.write(rawFrame(0xFD, 0, 1, q))
	a.expect(0xFC, 1)
	a.enqueue(2, enqueueBody("q", "x"))
	a.consume(3, "q", 1)
	first := a.delivery(3)[0]

	b := dialSpec(t, addr)
	b.handshake()
	b.consume(3, "q", 1)
	again := b.delivery(3)[0] // after A's lease expired
	if again.id != first.id || again.attempts != 2 {
		t.Fatalf("redelivery %+v", again)
	}

	settled := func(c *specConn, id uint32, op, resOp uint8, item be, extend bool) uint8 {
		c.write(rawFrame(op, 0, id, be(nil).u32(1).raw(item)))
		r := c.expect(resOp, id)
		if n := r.u32(); n != 1 {
			t.Fatalf("%d results", n)
		}
		code := r.u8()
		if extend {
			if exp := r.u64(); (code == 0) != (exp != 0) {
				t.Fatalf("ExtendLease code %#02x with expiry %d", code, exp)
			}
		}
		return code
	}
	ref := be(nil).str("q").raw(first.id[:])
	if code := settled(a, 4, 0x1B, 0x1C, be(nil).raw(ref).u64(60_000), true); code != 0x02 {
		t.Fatalf("the former holder's ExtendLease: %#02x, want MessageNotFound", code)
	}
	if code := settled(a, 5, 0x17, 0x18, ref, false); code != 0x02 {
		t.Fatalf("the former holder's Ack: %#02x, want MessageNotFound", code)
	}
	if code := settled(a, 6, 0x19, 0x1A, be(nil).raw(ref).str("late").u8(0), false); code != 0x02 {
		t.Fatalf("the former holder's Nack: %#02x, want MessageNotFound", code)
	}
	if code := settled(b, 7, 0x1B, 0x1C, be(nil).raw(ref).u64(60_000), true); code != 0 {
		t.Fatalf("the holder's ExtendLease: %#02x", code)
	}
	if code := settled(b, 8, 0x17, 0x18, ref, false); code != 0 {
		t.Fatalf("the holder's Ack: %#02x", code)
	}
}

// Leases recovered after a restart may be settled from any connection, even when a new
// connection's subscription has the consumer ID their old holder had (connection IDs start again).
func TestSpecRecoveredLeaseSettlesFromANewConnection(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "q")
	c.enqueue(2, enqueueBody("q", "x"))
	c.consume(1, "q", 1)
	d := c.delivery(1)[0]
	stop()

	addr, stop = startAt(t, dir)
	defer stop()
	x := dialSpec(t, addr) // the first connection again: its subscription 1 has the old consumer ID
	x.handshake()
	x.consume(1, "q", 1)
	y := dialSpec(t, addr)
	y.handshake()
	y.write(rawFrame(0x17, 0, 2, be(nil).u32(1).str("q").raw(d.id[:])))
	r := y.expect(0x18, 2)
	if n, code := r.u32(), r.u8(); n != 1 || code != 0 {
		t.Fatalf("acking a recovered lease from a new connection: %#02x", code)
	}
}

// On a fast queue, an ExtendLease during the reclaim grace after a restart "re-establishes the
// lease for that consumer": afterwards another consumer's Ack answers MessageNotFound, the
// reclaimer's succeeds.
func TestSpecReclaimedLeaseBelongsToTheReclaimer(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialSpec(t, addr)
	c.handshake()
	q := be(nil).str("f").u8(0).u8(0).u64(60_000)
	q = q.u8(0).u16(0).u8(0).u16(0).u64(0).u8(0).u32(0).u32(0).u8(0).u64(0).u64(0)
	q = q.u8(1).u64(3_600_000) // delivery_durability fast, reclaim grace 1 hour
	c.write(rawFrame(0xFD, 0, 1, q))
	c.expect(0xFC, 1)
	c.enqueue(2, enqueueBody("f", "x"))
	c.consume(3, "f", 1)
	d := c.delivery(3)[0]
	stop()

	addr, stop = startAt(t, dir)
	defer stop()
	x := dialSpec(t, addr)
	x.handshake()
	x.consume(1, "f", 0)
	y := dialSpec(t, addr)
	y.handshake()
	y.consume(1, "f", 0)
	x.write(rawFrame(0x1B, 0, 2, be(nil).u32(1).str("f").raw(d.id[:]).u64(60_000)))
	r := x.expect(0x1C, 2)
	if n, code := r.u32(), r.u8(); n != 1 || code != 0 {
		t.Fatalf("reclaiming ExtendLease: %#02x", code)
	}
	ack := func(c *specConn, id uint32) uint8 {
		c.write(rawFrame(0x17, 0, id, be(nil).u32(1).str("f").raw(d.id[:])))
		r := c.expect(0x18, id)
		r.u32()
		return r.u8()
	}
	if code := ack(y, 3); code != 0x02 {
		t.Fatalf("another consumer's Ack of the reclaimed lease: %#02x, want MessageNotFound", code)
	}
	if code := ack(x, 4); code != 0 {
		t.Fatalf("the reclaimer's Ack: %#02x", code)
	}
}

// An Error frame's message is a string (at most 65,535 bytes) even when it quotes a client's
// longest strings: the frame still decodes field by field.
func TestSpecErrorMessageFitsItsString(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	long := strings.Repeat("é", 65534/2) + "a"
	c.write(rawFrame(0x12, 0, 1, be(nil).str(long).u32(0).u16(0)))
	msg, _ := c.expectError(1, 0x01)
	if !utf8.ValidString(msg) {
		t.Fatal("the message is not UTF-8 once cut")
	}
	c.ping(2)
}

// Every string the server writes is UTF-8, including a fairness key or attribute an on_enqueue
// script made: a script that returns bytes that are not UTF-8 (e.g. a header cut mid-character)
// fails on that message (ScriptError) instead of producing a Delivery a spec client cannot decode.
func TestSpecScriptStringsMustBeUTF8(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	for i, script := range []string{
		`function on_enqueue(m) return { fairness_key = string.sub(m.headers["t"], 1, 1) } end`,
		`function on_enqueue(m) return { attributes = { a = string.sub(m.headers["t"], 1, 1) } } end`,
		`function on_enqueue(m) return { attributes = { [string.sub(m.headers["t"], 1, 1)] = "v" } } end`,
	} {
		name := fmt.Sprintf("q%d", i)
		q := be(nil).str(name).u8(1).text(script).u8(0).u64(0)
		q = q.u8(0).u16(0).u8(0).u16(0).u64(0).u8(0).u32(0).u32(0).u8(0).u64(0).u64(0).u8(0).u64(0)
		c.write(rawFrame(0xFD, 0, 1, q))
		if code := c.expect(0xFC, 1).u8(); code != 0 {
			t.Fatalf("CreateQueue: %#02x", code)
		}
		msg := be(nil).u32(1).str(name).u16(1).str("t").str("é").bytes(nil).u8(0).u8(0).u8(0).u8(0)
		if res := c.enqueue(2, msg); res[0].code != 0x13 {
			t.Fatalf("script %d: EnqueueResult %#02x, want ScriptError", i, res[0].code)
		}
	}
}

// A message larger than the maximum frame size travels both ways in continuation frames: split at
// raw byte boundaries, every frame but the last flagged CONTINUATION, one opcode and request ID.
func TestSpecContinuationBothWays(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialSpec(t, addr)
	c.handshake()
	c.createQueue(1, "big")
	payload := make([]byte, 17<<20)
	for i := range payload {
		payload[i] = byte(i % 251)
	}
	body := enqueueBody("big", string(payload))
	const chunk = 16<<20 - 6 // the largest body a 16 MiB frame holds
	c.write(rawFrame(0x10, 1, 2, body[:chunk]), rawFrame(0x10, 0, 2, body[chunk:]))
	if r := c.expect(0x11, 2); r.u32() != 1 || r.u8() != 0 {
		t.Fatal("the continued Enqueue failed")
	}

	c.write(rawFrame(0x12, 0, 3, be(nil).str("big").u32(0).u16(0)))
	c.expect(0x13, 3)
	var whole []byte
	for {
		f := c.next()
		if f.op != 0x14 || f.id != 3 || f.flags&^1 != 0 || 6+len(f.body) > 16<<20 {
			t.Fatalf("continued Delivery frame: opcode %#02x request %d flags %#x, %d bytes", f.op, f.id, f.flags, len(f.body))
		}
		whole = append(whole, f.body...)
		if f.flags == 0 {
			break
		}
	}
	r := &rd{t: t, b: whole}
	if n := r.u32(); n != 1 {
		t.Fatalf("%d messages", n)
	}
	r.uuid()
	if r.str() != "big" || len(r.strMap()) != 0 || string(r.bytes()) != string(payload) {
		t.Fatal("the reassembled Delivery does not carry the message")
	}
}
